/**
 * A plan's settings as one flat list of rows, for comparing plans side by side: the comparison view's settings
 * table and the attribution (attribution.ts) both walk these rows, so "a setting that differs" means the same
 * thing in both. Values are those of the parsed plan (defaults applied): a plan that leaves `precision` out and one
 * that writes `"fp32"` are the same setting.
 *
 * The model is one row (a different model is one change, however many of its fields differ); the GPU is one row
 * (a catalog GPU or a memory cap). What is trained is two rows: LoRA (its whole `LoraConfig`, or `false` for none:
 * a full fine-tune) and the frozen parameters' patterns, so a LoRA plan and a full fine-tune of the same model differ
 * in one setting, which the attribution can name.
 */
import { DEFAULT_GPU } from '../gpu/device.ts';
import type { Plan } from '../plan/schema.ts';
import { ALL_LINEAR, isAllLinear, type TargetModules } from '../models/peft/lora.ts';

/** Every row, in the order the table shows them. */
export const SETTING_KEYS = [
  'model',
  'training.batch_size',
  'training.seq_len',
  'training.image_size',
  'training.precision',
  'training.optimizer',
  'training.optimizer_impl',
  'training.grad_accumulation_steps',
  'training.activation_checkpointing',
  'training.attention',
  'training.steps',
  'training.grad_scaler_skipped_steps',
  'training.lora',
  'training.freeze',
  'allocator.conf',
  'gpu',
] as const;

export type SettingKey = (typeof SETTING_KEYS)[number];
/** The training rows whose value is the plan's field as it is (not the LoRA row: an absent `lora` is `false` there). */
type TrainingKey = Exclude<Extract<SettingKey, `training.${string}`> extends `training.${infer K}` ? K & keyof Plan['training'] : never, 'lora'>;

/** What the model row shows: where the model comes from and its name (`layers`: a layer list of `layer_count` top-level layers). */
export interface ModelSetting {
  source: 'preset' | 'torchvision' | 'hf_config' | 'layers';
  /** The preset or torchvision name, a config.json's `model_type` (and `_name_or_path` when it has one); '' for a layer list. */
  name: string;
  layer_count: number;
}

/** The GPU row: a catalog GPU (the plan's, or the default) or a memory cap in bytes. */
export type GpuSetting = { id: string } | { memory_limit_bytes: number };

/** The LoRA row: the plan's `training.lora` with its defaults (dropout 0, quantization "none"). */
export type LoraSetting = NonNullable<Plan['training']['lora']>;

/**
 * A row's value: `false` in the LoRA row is no LoRA (a full fine-tune, unless parameters are frozen); a list is
 * the frozen parameters' patterns.
 */
export type SettingValue = string | number | boolean | readonly string[] | ModelSetting | GpuSetting | LoraSetting;

export interface Setting {
  key: SettingKey;
  value: SettingValue;
  /** Equal for equal settings (the model's whole specification, its keys sorted): compare this, not `value`. */
  canonical: string;
}

/** JSON with object keys sorted: two specifications that differ only in key order are equal. */
function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : v,
  );
}

function modelSetting(model: Plan['model']): ModelSetting {
  if ('preset' in model) return { source: 'preset', name: model.preset, layer_count: 0 };
  if ('torchvision' in model) return { source: 'torchvision', name: model.torchvision, layer_count: 0 };
  if ('hf_config' in model) {
    const type = typeof model.hf_config['model_type'] === 'string' ? model.hf_config['model_type'] : '';
    const path = typeof model.hf_config['_name_or_path'] === 'string' ? model.hf_config['_name_or_path'] : '';
    return { source: 'hf_config', name: path ? `${type} (${path})` : type, layer_count: 0 };
  }
  return { source: 'layers', name: '', layer_count: model.layers.length };
}

function gpuSetting(gpu: Plan['gpu']): GpuSetting {
  if (gpu && 'memory_limit_bytes' in gpu) return { memory_limit_bytes: gpu.memory_limit_bytes };
  return { id: gpu?.name ?? DEFAULT_GPU };
}

function trainingKey(key: SettingKey): TrainingKey | null {
  return key.startsWith('training.') && key !== 'training.lora' ? (key.slice('training.'.length) as TrainingKey) : null;
}

/** The same set of names in any order (PEFT's target_modules and the freeze patterns are sets), without repeats. */
const nameSet = (names: readonly string[]): string[] => [...new Set(names)].sort();

/** The plan's value of one setting. */
export function settingOf(plan: Plan, key: SettingKey): Setting {
  if (key === 'training.lora') {
    const lora = plan.training.lora;
    // a list is a set of names; "all-linear" is one setting in any case; a regular expression is as written
    const targets = (t: TargetModules) => (typeof t !== 'string' ? nameSet(t) : isAllLinear(t) ? ALL_LINEAR : t);
    // modules_to_save is a set of names too (PEFT takes a module when any of them ends its name)
    return { key, value: lora ?? false, canonical: lora ? canonicalJson({ ...lora, target_modules: targets(lora.target_modules), modules_to_save: nameSet(lora.modules_to_save) }) : 'false' };
  }
  if (key === 'training.freeze') return { key, value: plan.training.freeze, canonical: JSON.stringify(nameSet(plan.training.freeze)) };
  const field = trainingKey(key);
  if (field !== null) {
    const value = plan.training[field];
    return { key, value, canonical: JSON.stringify(value) };
  }
  if (key === 'model') return { key, value: modelSetting(plan.model), canonical: canonicalJson(plan.model) };
  if (key === 'allocator.conf') return { key, value: plan.allocator.conf, canonical: JSON.stringify(plan.allocator.conf.replace(/\s+/g, '')) };
  const gpu = gpuSetting(plan.gpu);
  return { key, value: gpu, canonical: canonicalJson(gpu) };
}

/** Every setting of the plan, in SETTING_KEYS order. */
export function planSettings(plan: Plan): Setting[] {
  return SETTING_KEYS.map((key) => settingOf(plan, key));
}

/** The settings in which `other` differs from `base`, in SETTING_KEYS order. */
export function differingSettings(base: Plan, other: Plan): SettingKey[] {
  return SETTING_KEYS.filter((key) => settingOf(base, key).canonical !== settingOf(other, key).canonical);
}

/** `base` with one setting taken from `other` (a plan that differs from `base` in that setting alone). */
export function withSettingOf(base: Plan, other: Plan, key: SettingKey): Plan {
  if (key === 'training.lora') {
    const { lora: _drop, ...training } = base.training;
    return { ...base, training: other.training.lora ? { ...training, lora: other.training.lora } : training };
  }
  const field = trainingKey(key);
  if (field !== null) return { ...base, training: { ...base.training, [field]: other.training[field] } };
  if (key === 'model') return { ...base, model: other.model };
  if (key === 'allocator.conf') return { ...base, allocator: { conf: other.allocator.conf } };
  const { gpu: _drop, ...rest } = base;
  return other.gpu === undefined ? rest : { ...rest, gpu: other.gpu };
}
