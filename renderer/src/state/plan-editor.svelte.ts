/**
 * The plan being edited. The form's fields are kept as the user typed them (a config.json that is not JSON yet,
 * an empty batch size): bad input is shown beside its field and never thrown away. `plan` is the plan file
 * (docs/plan-format.md) those fields make, sent to the engine as it is; the engine's issues come back by path.
 * Opening a plan and saving it gives back every field it had: an optional key the opened plan wrote (a sequence
 * length on an image model, `grad_scaler_skipped_steps: 0`) is written back even where the form does not show it,
 * and so is what no field holds (a misspelt key, a second model form: kept-keys.ts): the engine names it, and the
 * results column offers to take it out (`keptKeys`, `removeKept`).
 */
import { isAllLinear, type LayerSpec, type TargetModules, type TrainingSpec } from '../../../engine/index.ts';
import { formKeys, isObject, keptKeys, keptOf, withKept, withoutKept, type FieldObjects, type Kept, type KeptKey } from './kept-keys.ts';

export type ModelMode = 'preset' | 'hf_config' | 'torchvision' | 'layers';

/** Names as a field takes them, separated by commas (target_modules, freeze patterns). */
const commaList = (text: string): string[] => text.split(',').map((x) => x.trim()).filter((x) => x !== '');

export type Precision = TrainingSpec['precision'];
export type Optimizer = TrainingSpec['optimizer'];
export type OptimizerImpl = TrainingSpec['optimizer_impl'];
/** A QLoRA base (bitsandbytes 4-bit or 8-bit), which the engine refuses at `training.lora.quantization`. */
export type LoraQuantization = NonNullable<TrainingSpec['lora']>['quantization'];
export type Checkpointing = 'off' | 'non_reentrant' | 'reentrant';
export type TorchvisionName = 'resnet18' | 'resnet34' | 'resnet50' | 'resnet101' | 'resnet152' | 'vit_b_16' | 'vit_l_16';

/** A layer as the editor holds it: the plan's layer plus a stable key for keyed lists and focus. */
export type LayerDraft = { key: number; type: LayerSpec['type']; layers?: LayerDraft[]; [field: string]: unknown };

export interface LocalIssue {
  path: string;
  message: string;
}

let nextKey = 1;
export const newKey = (): number => nextKey++;

/** Default fields of each layer type, as a new layer starts. */
export const LAYER_DEFAULTS: Record<LayerSpec['type'], Record<string, unknown>> = {
  linear: { in_features: 1024, out_features: 1024, bias: true },
  conv2d: { in_channels: 3, out_channels: 64, kernel_size: 3, stride: 1, padding: 1, bias: true },
  batch_norm2d: { num_features: 64 },
  layer_norm: { normalized_shape: 1024 },
  rms_norm: { normalized_shape: 1024 },
  relu: {},
  gelu: {},
  silu: {},
  tanh: {},
  sigmoid: {},
  flatten: {},
  dropout: { p: 0.1 },
  max_pool2d: { kernel_size: 2 },
  adaptive_avg_pool2d: { output_size: 1 },
  embedding: { num_embeddings: 32000, embedding_dim: 1024 },
  self_attention: { embed_dim: 1024, num_heads: 16 },
  residual: {},
  repeat: { count: 4 },
};

export const LAYER_TYPES = Object.keys(LAYER_DEFAULTS) as LayerSpec['type'][];
export const isBlock = (type: string): type is 'residual' | 'repeat' => type === 'residual' || type === 'repeat';

export function newLayer(type: LayerSpec['type']): LayerDraft {
  const draft: LayerDraft = { key: newKey(), type, ...structuredClone(LAYER_DEFAULTS[type]) };
  if (isBlock(type)) draft.layers = [newLayer('linear'), newLayer('gelu')];
  return draft;
}

export function toDraft(layer: LayerSpec): LayerDraft {
  const { layers, ...fields } = layer as LayerSpec & { layers?: LayerSpec[] };
  return { key: newKey(), ...fields, ...(layers ? { layers: layers.map(toDraft) } : {}) };
}

function fromDraft(draft: LayerDraft): unknown {
  const { key: _key, layers, ...fields } = draft;
  return { ...fields, ...(layers ? { layers: layers.map(fromDraft) } : {}) };
}

const EXAMPLE_LAYERS: LayerSpec[] = [
  { type: 'linear', in_features: 1024, out_features: 4096 },
  { type: 'gelu' },
  { type: 'repeat', count: 4, layers: [{ type: 'residual', layers: [{ type: 'layer_norm', normalized_shape: 4096 }, { type: 'linear', in_features: 4096, out_features: 4096 }, { type: 'gelu' }] }] },
  { type: 'linear', in_features: 4096, out_features: 1000 },
];

/** What a plan file's model and training settings are, for the fields that apply. */
export type InputKind = 'tokens' | 'images' | 'layers';

const VISION_PRESETS = /^(resnet|vit)/;
/** torchvision's `num_classes` when a plan does not say (the engine's default too). */
const DEFAULT_NUM_CLASSES = 1000;

interface Snapshot {
  plan: unknown;
  hfText: string;
}

export class PlanEditor {
  name = $state('');
  notes = $state('');
  tags = $state<string[]>([]);
  /** The saved plan this editor shows (null: not saved yet). */
  savedId = $state<string | null>(null);
  #savedState = $state('');

  modelMode = $state<ModelMode>('preset');
  preset = $state('gpt2');
  hfText = $state('');
  torchvision = $state<TorchvisionName>('resnet50');
  numClasses = $state<number | null>(1000);
  layers = $state<LayerDraft[]>(EXAMPLE_LAYERS.map(toDraft));
  layerInput = $state<'features' | 'shape'>('features');
  inputFeatures = $state<number | null>(1024);
  inputShapeText = $state('3, 32, 32');

  batchSize = $state<number | null>(8);
  seqLen = $state<number | null>(1024);
  imageSize = $state<number | null>(224);
  precision = $state<Precision>('amp_bf16');
  optimizer = $state<Optimizer>('adamw');
  optimizerImpl = $state<OptimizerImpl>('foreach');
  accumulation = $state<number | null>(1);
  checkpointing = $state<Checkpointing>('off');
  attention = $state<'sdpa' | 'eager'>('sdpa');
  steps = $state<number | null>(3);
  /** `training.grad_scaler_skipped_steps`: amp_fp16's first optimizer steps that GradScaler skips (overflowed). */
  gradScalerSkippedSteps = $state<number | null>(0);
  /** `training.lora` (Hugging Face decoders) and `training.freeze`; the lists as typed, comma-separated. */
  loraOn = $state(false);
  loraRank = $state<number | null>(16);
  loraAlpha = $state<number | null>(32);
  loraDropout = $state<number | null>(0.05);
  /** `training.lora.target_modules` as typed: names separated by commas, "all-linear", or a regular expression. */
  loraTargetsText = $state('q_proj, v_proj');
  /** `training.lora.modules_to_save` as typed: module names separated by commas (empty: none). */
  loraSavedText = $state('');
  /** `training.lora.ensure_weight_tying`: a tied embedding and lm_head named in modules_to_save share one copy. */
  loraTieWeights = $state(false);
  /** `training.lora.use_dora`: DoRA adapters. */
  loraDora = $state(false);
  loraQuantization = $state<LoraQuantization>('none');
  freezeText = $state('');

  gpuMode = $state<'catalog' | 'custom'>('catalog');
  gpuName = $state('h100-sxm');
  customGiB = $state<number | null>(40);
  allocatorConf = $state('');

  /** The optional keys the opened plan wrote (`training.seq_len`, `model.num_classes`): written back as they were. */
  #opened = $state.raw<ReadonlySet<string>>(new Set());
  /**
   * The opened plan's target_modules and the text the field showed for it: written back as the file had it while
   * the field is not edited. Read from the text, a pattern without a pattern's characters would become a list
   * (`"lm_head"` matches only the module of that whole name, `["lm_head"]` also `*.lm_head`), and a list with
   * one (`["q_proj", "layers.0.*"]`) a pattern.
   */
  #openedTargets = $state.raw<{ text: string; value: TargetModules } | null>(null);
  /**
   * The opened plan's modules_to_save and the text the field showed for it: written back as the file had it while the
   * field is not edited (a value that is no list is then reported at its field, not dropped).
   */
  #openedSaved = $state.raw<{ text: string; value: unknown } | null>(null);
  /** The opened plan's ensure_weight_tying and the box it checked: written back as it was while the box is not changed. */
  #openedTie = $state.raw<{ checked: boolean; value: unknown } | null>(null);
  /** The opened plan's use_dora and the box it checked, as #openedTie. */
  #openedDora = $state.raw<{ checked: boolean; value: unknown } | null>(null);
  /** The opened plan's memory cap: written back to the byte while the GiB field (rounded to 0.01) is not edited. */
  #openedCap = $state.raw<{ gib: number; bytes: number } | null>(null);
  /** What the opened plan had that no field holds, written back as it was until the user removes it (kept-keys.ts). */
  #kept = $state.raw<Kept>({});

  /** The pasted config.json, parsed (or why it is not JSON). */
  hfParsed: { ok: true; value: unknown } | { ok: false; message: string } = $derived.by(() => {
    if (this.hfText.trim() === '') return { ok: false, message: 'empty' };
    try {
      return { ok: true, value: JSON.parse(this.hfText) };
    } catch (error) {
      return { ok: false, message: (error as Error).message };
    }
  });

  inputShape: number[] | null = $derived.by(() => {
    const parts = this.inputShapeText.split(/[\s,x×]+/).filter(Boolean).map(Number);
    return parts.length > 0 && parts.every((n) => Number.isFinite(n)) ? parts : null;
  });

  /** Problems found here, before the engine: text that is not JSON, a shape that is not numbers. */
  localIssues: LocalIssue[] = $derived.by(() => {
    const out: LocalIssue[] = [];
    if (this.modelMode === 'hf_config' && !this.hfParsed.ok) out.push({ path: 'model.hf_config', message: this.hfParsed.message === 'empty' ? 'local:hf_empty' : `local:hf_json:${this.hfParsed.message}` });
    if (this.modelMode === 'layers' && this.layerInput === 'shape' && !this.inputShape) out.push({ path: 'model.input_shape', message: 'local:shape' });
    return out;
  });

  inputKind: InputKind = $derived.by(() => {
    switch (this.modelMode) {
      case 'preset':
        return VISION_PRESETS.test(this.preset) ? 'images' : 'tokens';
      case 'hf_config':
        return 'tokens';
      case 'torchvision':
        return 'images';
      default:
        return 'layers';
    }
  });

  /** The Hugging Face models have attention implementations to pick from; the others do not use the setting. */
  usesAttention: boolean = $derived(this.inputKind === 'tokens' || (this.modelMode === 'layers' && JSON.stringify(this.layers).includes('self_attention')));

  model: unknown = $derived.by(() => {
    switch (this.modelMode) {
      case 'preset':
        // (a token model takes no num_classes: not written back once the preset is no longer a vision model)
        return this.inputKind === 'images' && (this.numClasses !== DEFAULT_NUM_CLASSES || this.#opened.has('model.num_classes')) ? { preset: this.preset, num_classes: this.numClasses } : { preset: this.preset };
      case 'hf_config':
        return { hf_config: this.hfParsed.ok ? this.hfParsed.value : {} };
      case 'torchvision':
        return { torchvision: this.torchvision, num_classes: this.numClasses };
      default:
        return this.layerInput === 'features'
          ? { layers: this.layers.map(fromDraft), input_features: this.inputFeatures }
          : { layers: this.layers.map(fromDraft), input_shape: this.inputShape ?? [] };
    }
  });

  /** What the fields write in each object of the plan file (training.lora: none while LoRA is off). */
  #fields: FieldObjects = $derived.by(() => {
    const training: Record<string, unknown> = {
      batch_size: this.batchSize,
      precision: this.precision,
      optimizer: this.optimizer,
      optimizer_impl: this.optimizerImpl,
      grad_accumulation_steps: this.accumulation,
      activation_checkpointing: this.checkpointing === 'off' ? false : this.checkpointing,
      attention: this.attention,
      steps: this.steps,
    };
    const opened = (path: string) => this.#opened.has(path);
    if (this.inputKind === 'tokens' || opened('training.seq_len')) training.seq_len = this.seqLen;
    if (this.inputKind === 'images' || opened('training.image_size')) training.image_size = this.imageSize;
    if (this.gradScalerSkippedSteps !== 0 || opened('training.grad_scaler_skipped_steps')) training.grad_scaler_skipped_steps = this.gradScalerSkippedSteps;
    if (this.inputKind === 'tokens' && this.loraOn) {
      training.lora = {
        r: this.loraRank,
        alpha: this.loraAlpha,
        dropout: this.loraDropout,
        target_modules: this.#targetModules(),
        ...(commaList(this.loraSavedText).length || opened('training.lora.modules_to_save') ? { modules_to_save: this.#modulesToSave() } : {}),
        ...(this.loraTieWeights || this.#openedTie !== null ? { ensure_weight_tying: this.#openedTie?.checked === this.loraTieWeights ? this.#openedTie.value : this.loraTieWeights } : {}),
        ...(this.loraDora || this.#openedDora !== null ? { use_dora: this.#openedDora?.checked === this.loraDora ? this.#openedDora.value : this.loraDora } : {}),
        ...(this.loraQuantization !== 'none' || opened('training.lora.quantization') ? { quantization: this.loraQuantization } : {}),
      };
    }
    if (commaList(this.freezeText).length) training.freeze = commaList(this.freezeText);
    return {
      model: this.model as Record<string, unknown>,
      training,
      'training.lora': training.lora as Record<string, unknown> | undefined,
      allocator: { conf: this.allocatorConf },
      gpu: this.gpuMode === 'catalog' ? { name: this.gpuName } : { memory_limit_bytes: this.#capBytes() },
    };
  });

  /** The plan file these fields make (not yet validated: the engine says what is wrong, by path). */
  plan: Record<string, unknown> = $derived.by(() => {
    // The fields' values first, then what the opened plan had that no field holds (never over a field's value).
    const kept = this.#kept;
    const fields = this.#fields;
    const training = withKept(kept, 'training', fields.training);
    if (fields['training.lora']) training.lora = withKept(kept, 'training.lora', fields['training.lora']);
    return {
      format: 'memplan.plan',
      version: 1,
      name: this.name,
      model: withKept(kept, 'model', fields.model),
      training,
      allocator: withKept(kept, 'allocator', fields.allocator),
      gpu: withKept(kept, 'gpu', fields.gpu),
      // a format or version other than memplan's, a section that is not an object: as written
      ...kept[''],
    };
  });

  /** What the opened plan had that no field holds, as it is still written back. */
  keptKeys: KeptKey[] = $derived(keptKeys(this.#kept, this.#fields));

  /** Takes something the opened plan had that no field holds out of the plan (`keptKeys`). */
  removeKept(k: KeptKey): void {
    this.#kept = withoutKept(this.#kept, k);
  }

  #capBytes(): number | null {
    if (this.customGiB === null) return null;
    return this.#openedCap?.gib === this.customGiB ? this.#openedCap.bytes : Math.round(this.customGiB * 1024 ** 3);
  }

  /** Whether the plan can go to the engine at all (local problems block it; engine problems come back). */
  sendable: boolean = $derived(this.localIssues.length === 0);

  #state(): string {
    return JSON.stringify({ plan: this.plan, hfText: this.modelMode === 'hf_config' ? this.hfText : '', notes: this.notes, tags: this.tags } satisfies Snapshot & { notes: string; tags: string[] });
  }

  /** Edited since it was last saved or opened. */
  dirty: boolean = $derived(this.#savedState !== this.#state());

  markSaved(id: string | null): void {
    this.savedId = id;
    this.#savedState = this.#state();
  }

  /** Reads a plan file into the fields (an opened saved plan, an opened file). */
  load(plan: Record<string, unknown>, meta: { id?: string | null; name?: string; notes?: string; tags?: string[] } = {}): void {
    const model = isObject(plan.model) ? plan.model : {};
    const training = isObject(plan.training) ? plan.training : {};
    const lora = training.lora as { r?: unknown; alpha?: unknown; dropout?: unknown; target_modules?: unknown; modules_to_save?: unknown; ensure_weight_tying?: unknown; use_dora?: unknown; quantization?: unknown } | undefined | null;
    const opened = new Set<string>();
    for (const key of ['seq_len', 'image_size', 'grad_scaler_skipped_steps']) if (key in training) opened.add(`training.${key}`);
    if (lora && 'quantization' in lora) opened.add('training.lora.quantization');
    if (lora && 'modules_to_save' in lora) opened.add('training.lora.modules_to_save');
    if (typeof model.preset === 'string' && 'num_classes' in model) opened.add('model.num_classes');
    this.#opened = opened;
    const num = (v: unknown, fallback: number | null) => (typeof v === 'number' ? v : v === undefined ? fallback : null);
    this.numClasses = num(model.num_classes, DEFAULT_NUM_CLASSES);
    // Every form the file gives fills its fields (a second form beside the shown one is kept, and switching to it
    // shows the file's values); the form shown is the first of preset, config.json, torchvision, layers.
    if (typeof model.preset === 'string') this.preset = model.preset;
    if (model.hf_config !== undefined) this.hfText = JSON.stringify(model.hf_config, null, 2);
    if (typeof model.torchvision === 'string') this.torchvision = model.torchvision as TorchvisionName;
    if (Array.isArray(model.layers)) this.layers = (model.layers as LayerSpec[]).map(toDraft);
    if (Array.isArray(model.input_shape)) this.inputShapeText = (model.input_shape as number[]).join(', ');
    if ('input_features' in model) this.inputFeatures = num(model.input_features, null);
    if (typeof model.preset === 'string') this.modelMode = 'preset';
    else if (model.hf_config !== undefined) this.modelMode = 'hf_config';
    else if (typeof model.torchvision === 'string') this.modelMode = 'torchvision';
    else if (Array.isArray(model.layers)) {
      this.modelMode = 'layers';
      // with both, the engine reads input_features
      this.layerInput = Array.isArray(model.input_shape) && model.input_features === undefined ? 'shape' : 'features';
      if (this.layerInput === 'features' && model.input_features === undefined) this.inputFeatures = null; // reported at its field
    }
    this.batchSize = num(training.batch_size, 8);
    this.seqLen = num(training.seq_len, 512);
    this.imageSize = num(training.image_size, 224);
    this.precision = (training.precision as Precision | undefined) ?? 'fp32';
    this.optimizer = (training.optimizer as Optimizer | undefined) ?? 'adamw';
    this.optimizerImpl = (training.optimizer_impl as OptimizerImpl | undefined) ?? 'foreach';
    this.accumulation = num(training.grad_accumulation_steps, 1);
    const ckpt = training.activation_checkpointing;
    this.checkpointing = ckpt === true ? 'non_reentrant' : ckpt === 'non_reentrant' || ckpt === 'reentrant' ? ckpt : 'off';
    this.attention = training.attention === 'eager' ? 'eager' : 'sdpa';
    this.steps = num(training.steps, 3);
    this.gradScalerSkippedSteps = num(training.grad_scaler_skipped_steps, 0);
    this.loraOn = lora !== undefined && lora !== null;
    this.loraRank = num(lora?.r, 16);
    this.loraAlpha = num(lora?.alpha, 32);
    this.loraDropout = num(lora?.dropout, lora ? 0 : 0.05);
    const targets = lora?.target_modules;
    this.loraTargetsText = typeof targets === 'string' ? targets : Array.isArray(targets) ? (targets as string[]).join(', ') : 'q_proj, v_proj';
    this.#openedTargets = typeof targets === 'string' || Array.isArray(targets) ? { text: this.loraTargetsText, value: targets as TargetModules } : null;
    const saved = lora?.modules_to_save;
    this.loraSavedText = Array.isArray(saved) ? saved.join(', ') : typeof saved === 'string' ? saved : '';
    this.#openedSaved = lora && 'modules_to_save' in lora ? { text: this.loraSavedText, value: saved } : null;
    this.loraTieWeights = lora?.ensure_weight_tying === true;
    this.#openedTie = lora && 'ensure_weight_tying' in lora ? { checked: this.loraTieWeights, value: lora.ensure_weight_tying } : null;
    this.loraDora = lora?.use_dora === true;
    this.#openedDora = lora && 'use_dora' in lora ? { checked: this.loraDora, value: lora.use_dora } : null;
    // as written, so a value the schema does not accept is reported at its field instead of dropped
    this.loraQuantization = (lora?.quantization as LoraQuantization | undefined) ?? 'none';
    this.freezeText = Array.isArray(training.freeze) ? (training.freeze as string[]).join(', ') : '';
    const gpu = isObject(plan.gpu) ? plan.gpu : {};
    if (typeof gpu.memory_limit_bytes === 'number') {
      this.customGiB = Math.round((gpu.memory_limit_bytes / 1024 ** 3) * 100) / 100;
      this.#openedCap = { gib: this.customGiB, bytes: gpu.memory_limit_bytes };
    } else this.#openedCap = null;
    if (typeof gpu.name === 'string') this.gpuName = gpu.name;
    // with both, the engine reads the name
    this.gpuMode = typeof gpu.memory_limit_bytes === 'number' && gpu.name === undefined ? 'custom' : 'catalog';
    if (this.gpuMode === 'catalog' && typeof gpu.name !== 'string') this.gpuName = 'h100-sxm';
    this.allocatorConf = isObject(plan.allocator) && typeof plan.allocator.conf === 'string' ? plan.allocator.conf : '';
    const shownModel = this.modelMode === 'layers' ? (this.layerInput === 'shape' ? 'input_shape' : 'input_features') : this.modelMode;
    this.#kept = keptOf(plan, { model: formKeys('model', shownModel), gpu: formKeys('gpu', this.gpuMode === 'custom' ? 'memory_limit_bytes' : 'name') });
    this.name = meta.name ?? (typeof plan.name === 'string' ? plan.name : '');
    this.notes = meta.notes ?? '';
    this.tags = meta.tags ?? [];
    this.markSaved(meta.id ?? null);
  }

  /**
   * target_modules from its field, in PEFT's forms: "all-linear" (any case) and a regular expression are one
   * string, where a pattern is text with a character no module name has (`\ ( ) [ ] | * + ? ^ $ { }`); anything
   * else is names separated by commas. The opened plan's value, unedited, is written back as it was.
   */
  #targetModules(): TargetModules {
    const opened = this.#openedTargets;
    if (opened !== null && this.loraTargetsText === opened.text) return opened.value;
    const text = this.loraTargetsText.trim();
    if (isAllLinear(text) || /[\\()[\]|*+?^${}]/.test(text)) return text;
    return commaList(text);
  }

  /** modules_to_save from its field: names separated by commas; the opened plan's value, unedited, as it was. */
  #modulesToSave(): unknown {
    const opened = this.#openedSaved;
    if (opened !== null && this.loraSavedText === opened.text) return opened.value;
    return commaList(this.loraSavedText);
  }

  /** A fresh plan (GPT-2, AMP bf16 on an H100), not saved. */
  reset(): void {
    this.load({ model: { preset: 'gpt2' }, training: { batch_size: 8, seq_len: 1024, precision: 'amp_bf16' }, gpu: { name: 'h100-sxm' } }, { name: '' });
    this.#opened = new Set(); // a fresh plan's sequence length is not one a user wrote
    this.hfText = '';
    this.layers = EXAMPLE_LAYERS.map(toDraft);
    this.markSaved(null);
  }

  /** `expandable_segments:True` in the allocator string, switched on or off without touching the other options. */
  get expandableSegments(): boolean {
    return /(^|,)\s*expandable_segments\s*:\s*true\s*(,|$)/i.test(this.allocatorConf);
  }

  set expandableSegments(on: boolean) {
    const others = this.allocatorConf
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '' && !/^expandable_segments\s*:/i.test(s));
    this.allocatorConf = (on ? ['expandable_segments:True', ...others] : others).join(',');
  }
}
