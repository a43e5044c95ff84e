/**
 * What an opened plan file has that no field of the editor holds: a misspelt key, a key of a newer memplan, a
 * second model or GPU form beside the one the editor shows, a section that is not an object, a format or version
 * other than memplan's. The editor writes it back as it was (nothing the user wrote is lost), the engine names
 * what is wrong with it, and the user takes it out with one click. The keys each object takes are the plan
 * schema's (engine/plan/schema.ts).
 */
import { gpuSchema, modelSchema, planSchema, trainingSchema } from '../../../engine/index.ts';

/** The objects of a plan file whose keys the editor reads one by one (a config.json is kept whole, as text). */
export type KeptObject = '' | 'model' | 'training' | 'training.lora' | 'allocator' | 'gpu';

/** What each object had that no field holds, by key. */
export type Kept = Partial<Record<KeptObject, Record<string, unknown>>>;

/** One key of `Kept`, and its path in the plan file (`training.batchsize`, `comment`). */
export interface KeptKey {
  where: KeptObject;
  key: string;
  path: string;
}

const PLAN_KEYS = Object.keys(planSchema.shape);
const SECTIONS = ['model', 'training', 'allocator', 'gpu'] as const;
const TRAINING_KEYS = Object.keys(trainingSchema.shape);
const LORA_KEYS = Object.keys(trainingSchema.shape.lora.unwrap().shape);
const ALLOCATOR_KEYS = Object.keys(planSchema.shape.allocator.unwrap().shape);
/** The keys of each form a model can take (preset, hf_config, torchvision, layers with features or a shape). */
const MODEL_FORMS = modelSchema.options.map((o) => Object.keys(o.shape));
const GPU_FORMS = gpuSchema.options.map((o) => Object.keys(o.shape));

export function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** A copy of an object without some keys. */
export function omit(object: Record<string, unknown> | undefined, keys: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(object ?? {})) if (!keys.includes(key)) out[key] = value;
  return out;
}

/** The keys of the model form, or the GPU form, that has `key` (`input_shape` for a layer list given a shape). */
export function formKeys(forms: 'model' | 'gpu', key: string): string[] {
  return (forms === 'model' ? MODEL_FORMS : GPU_FORMS).find((keys) => keys.includes(key)) ?? [key];
}

/**
 * What a plan file has that the editor's fields do not hold, given the model and GPU forms the editor shows (the
 * keys of each: `formKeys`).
 */
export function keptOf(plan: Record<string, unknown>, shown: { model: readonly string[]; gpu: readonly string[] }): Kept {
  const top = omit(plan, PLAN_KEYS);
  if (plan.format !== undefined && plan.format !== 'memplan.plan') top.format = plan.format;
  if (plan.version !== undefined && plan.version !== 1) top.version = plan.version;
  // a section that is not an object is kept whole, in place of the editor's (the engine says what it expected)
  for (const section of SECTIONS) if (plan[section] !== undefined && !isObject(plan[section])) top[section] = plan[section];
  const section = (key: (typeof SECTIONS)[number]) => (isObject(plan[key]) ? plan[key] : {});
  const training = section('training');
  return {
    '': top,
    model: omit(section('model'), shown.model),
    training: omit(training, TRAINING_KEYS),
    'training.lora': omit(isObject(training.lora) ? training.lora : {}, LORA_KEYS),
    allocator: omit(section('allocator'), ALLOCATOR_KEYS),
    gpu: omit(section('gpu'), shown.gpu),
  };
}

/** An object of the editor's plan with what was kept beside its fields (never over a field's value). */
export function withKept(kept: Kept, where: KeptObject, fields: Record<string, unknown>): Record<string, unknown> {
  return { ...fields, ...omit(kept[where], Object.keys(fields)) };
}

/** What the editor's fields write in each object of the plan file (training.lora: none while LoRA is off). */
export type FieldObjects = Record<'model' | 'training' | 'allocator' | 'gpu', Record<string, unknown>> & { 'training.lora': Record<string, unknown> | undefined };

/**
 * The kept keys written back now: a top-level one always, one inside an object unless a field writes that key
 * there (its own value then: the form or the GPU the user picked) or the object is not written (LoRA off).
 */
export function keptKeys(kept: Kept, fields: FieldObjects): KeptKey[] {
  const out: KeptKey[] = [];
  for (const [where, values] of Object.entries(kept) as [KeptObject, Record<string, unknown>][]) {
    const written = where === '' ? null : fields[where];
    if (where !== '' && !written) continue;
    for (const key of Object.keys(values)) if (!written || !(key in written)) out.push({ where, key, path: where ? `${where}.${key}` : key });
  }
  return out;
}

/** What is kept, without one key. */
export function withoutKept(kept: Kept, k: Pick<KeptKey, 'where' | 'key'>): Kept {
  const values = kept[k.where];
  return values && k.key in values ? { ...kept, [k.where]: omit(values, [k.key]) } : kept;
}
