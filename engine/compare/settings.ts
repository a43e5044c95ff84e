/**
 * A plan's settings as one flat list of rows, for comparing plans side by side: the comparison view's settings
 * table and the attribution (attribution.ts) both walk these rows, so "a setting that differs" means the same
 * thing in both. Values are those of the parsed plan (defaults applied): a plan that leaves `precision` out and one
 * that writes `"fp32"` are the same setting.
 *
 * The model is one row (a different model is one change, however many of its fields differ); the GPU is one row
 * (a catalog GPU or a memory cap).
 */
import { DEFAULT_GPU } from '../gpu/device.ts';
import type { Plan } from '../plan/schema.ts';

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
  'allocator.conf',
  'gpu',
] as const;

export type SettingKey = (typeof SETTING_KEYS)[number];
type TrainingKey = Extract<SettingKey, `training.${string}`> extends `training.${infer K}` ? K & keyof Plan['training'] : never;

/** What the model row shows: where the model comes from and its name (`layers`: a layer list of `layer_count` top-level layers). */
export interface ModelSetting {
  source: 'preset' | 'torchvision' | 'hf_config' | 'layers';
  /** The preset or torchvision name, a config.json's `model_type` (and `_name_or_path` when it has one); '' for a layer list. */
  name: string;
  layer_count: number;
}

/** The GPU row: a catalog GPU (the plan's, or the default) or a memory cap in bytes. */
export type GpuSetting = { id: string } | { memory_limit_bytes: number };

export type SettingValue = string | number | boolean | ModelSetting | GpuSetting;

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
  return key.startsWith('training.') ? (key.slice('training.'.length) as TrainingKey) : null;
}

/** The plan's value of one setting. */
export function settingOf(plan: Plan, key: SettingKey): Setting {
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
  const field = trainingKey(key);
  if (field !== null) return { ...base, training: { ...base.training, [field]: other.training[field] } };
  if (key === 'model') return { ...base, model: other.model };
  if (key === 'allocator.conf') return { ...base, allocator: { conf: other.allocator.conf } };
  const { gpu: _drop, ...rest } = base;
  return other.gpu === undefined ? rest : { ...rest, gpu: other.gpu };
}
