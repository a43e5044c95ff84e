/**
 * What to change, for a plan that does not fit or to fit a larger batch: each variant of the plan is simulated
 * (not estimated). Only the changes that help are advised; the others are listed with the reason they are not
 * (`not_applicable`), so a UI can say why a familiar trick is missing. Advice is ids with parameters
 * (engine/result/advice.ts); the CLI and the renderer word them.
 *
 * Two goals: `memory` (after a simulation: a change helps when it lowers the peak reserved memory) and `batch`
 * (after a max-batch search: a change helps when it raises the largest effective batch). `adviseSteps` is a
 * generator that yields variant by variant, so a host can stream the advice and stop between variants.
 */
import { InputError } from '../errors.ts';
import { hasBf16Arithmetic } from '../gpu/catalog.ts';
import type { DeviceSpec } from '../gpu/device.ts';
import { hfConfigOf, type Plan } from '../plan/schema.ts';
import type { AdviceId, AdviceItem, AdviceResult, NotApplicable } from '../result/advice.ts';
import type { MaxBatchResult, Trial } from '../result/max-batch.ts';
import { RESULT_SCHEMA_VERSION } from '../result/version.ts';
import { neededMemory, simulate, UNBOUNDED_MEMORY_BYTES } from '../train/simulate.ts';
import { LORA_MODEL_TYPES, PEFT_LORA_DEFAULTS, peftDefaultTargets } from '../models/peft/lora.ts';
import { resolveHfConfig } from '../models/hf/config.ts';
import { pytorchFailure } from '../plan/parse.ts';
import { bytesPerSample, findMaxBatch, fitsBySearch, largestBatch, type SearchStart } from './max-batch.ts';

/** A changed copy of the plan, with what the change is in parameters (`AdviceItem` without the measures). */
export type Variant = { [Id in AdviceId]: { id: Id; params: Omit<Extract<AdviceItem, { id: Id }>, 'id' | keyof Measures>; plan: Plan } }[AdviceId];

type Measures = Pick<AdviceItem, 'peak_allocated_bytes' | 'peak_reserved_bytes' | 'saved_bytes' | 'fits' | 'max_batch' | 'max_effective_batch'>;

function withTraining(plan: Plan, training: Partial<Plan['training']>): Plan {
  return { ...plan, training: { ...plan.training, ...training } };
}

/** What the changes to try depend on besides the plan. */
export interface VariantOptions {
  /** The batch the accumulation change starts from: the plan's own (default), or the largest that fits. */
  microBatch?: number;
  /** `memory` (default): the same effective batch in less memory; `batch`: a larger effective batch. */
  goal?: 'memory' | 'batch';
  /** The GPU, where it decides (bf16 only where it computes in bf16); any GPU when not given. */
  gpu?: Pick<DeviceSpec, 'vendor' | 'compute_capability'>;
}

/** The changes worth simulating for this plan, and those that cannot apply (already done, or nothing to change). */
export function planVariants(plan: Plan, options: VariantOptions = {}): { variants: Variant[]; not_applicable: NotApplicable[] } {
  const { microBatch = plan.training.batch_size, goal = 'memory', gpu } = options;
  const t = plan.training;
  const variants: Variant[] = [];
  const notApplicable: NotApplicable[] = [];
  const skip = (id: AdviceId, reason_id: NotApplicable['reason_id'], message?: string) => notApplicable.push({ id, reason_id, ...(message ? { message } : {}) });
  const bf16 = gpu === undefined || hasBf16Arithmetic(gpu);

  if (t.precision !== 'fp32') skip('amp_bf16', 'already_set');
  else if (!bf16) skip('amp_bf16', 'gpu_without_bf16');
  else variants.push({ id: 'amp_bf16', params: {}, plan: withTraining(plan, { precision: 'amp_bf16' }) });

  // Autocast keeps fp32 weights, gradients and optimizer state; many fine-tunes load the model in bf16 and train it
  // so. A step past autocast (an fp32 plan is advised autocast first), and not from fp16 AMP (another format).
  const bf16Failure = t.precision === 'amp_bf16' ? pytorchFailure(withTraining(plan, { precision: 'bf16' })) : null;
  if (t.precision === 'bf16' || t.precision === 'fp16') skip('bf16_weights', 'already_set');
  else if (!bf16) skip('bf16_weights', 'gpu_without_bf16');
  else if (t.precision !== 'amp_bf16') skip('bf16_weights', 'needs_amp_bf16');
  else if (bf16Failure) skip('bf16_weights', 'fails_in_pytorch', bf16Failure);
  else variants.push({ id: 'bf16_weights', params: { lora: t.lora !== undefined, hugging_face: hfModelType(plan) !== null }, plan: withTraining(plan, { precision: 'bf16' }) });

  if (t.activation_checkpointing === false) variants.push({ id: 'checkpointing', params: {}, plan: withTraining(plan, { activation_checkpointing: 'non_reentrant' }) });
  else skip('checkpointing', 'already_set');

  if (t.optimizer === 'sgd') skip('fused_optimizer', 'no_optimizer_state');
  else if (t.optimizer_impl === 'fused') skip('fused_optimizer', 'already_set');
  else variants.push({ id: 'fused_optimizer', params: { optimizer: t.optimizer }, plan: withTraining(plan, { optimizer_impl: 'fused' }) });

  const steps = t.grad_accumulation_steps * 2;
  const planEffective = t.batch_size * t.grad_accumulation_steps;
  if (goal === 'batch') {
    // Keep the largest micro-batch and run twice the accumulation steps: the effective batch doubles.
    if (microBatch < 1) skip('accumulation', 'batch_of_one');
    else variants.push({ id: 'accumulation', params: { micro_batch: microBatch, steps, effective_batch: microBatch * steps, plan_effective_batch: microBatch * t.grad_accumulation_steps }, plan: withTraining(plan, { batch_size: microBatch, grad_accumulation_steps: steps }) });
  } else if (microBatch <= 1) skip('accumulation', 'batch_of_one');
  else {
    // Half the micro-batch, twice the steps: the same effective batch (one less when the batch is odd).
    const half = Math.floor(microBatch / 2);
    variants.push({ id: 'accumulation', params: { micro_batch: half, steps, effective_batch: half * steps, plan_effective_batch: planEffective }, plan: withTraining(plan, { batch_size: half, grad_accumulation_steps: steps }) });
  }

  if (/expandable_segments:\s*True/i.test(plan.allocator.conf)) skip('expandable_segments', 'already_set');
  else {
    const conf = plan.allocator.conf ? `${plan.allocator.conf},expandable_segments:True` : 'expandable_segments:True';
    const expandable: Plan = { ...plan, allocator: { conf } };
    // an odd large_segment_size_mb: pages cuMemCreate refuses (Note [large_segment_size_mb])
    const failure = pytorchFailure(expandable);
    if (failure) skip('expandable_segments', 'fails_in_pytorch', failure);
    else variants.push({ id: 'expandable_segments', params: { alloc_conf: conf }, plan: expandable });
  }

  if (t.attention === 'eager') variants.push({ id: 'sdpa', params: {}, plan: withTraining(plan, { attention: 'sdpa' }) });
  else skip('sdpa', 'already_set');
  return { variants, not_applicable: notApplicable };
}

/** The Hugging Face `model_type` of a plan's model (pasted config.json or preset); null for layer lists and torchvision. */
function hfModelType(plan: Plan): string | null {
  const config = hfConfigOf(plan.model);
  return typeof config?.['model_type'] === 'string' ? config['model_type'] : null;
}

/**
 * PEFT's task type for the plan's head: SEQ_CLS for a sequence classifier, TOKEN_CLS for a token classifier,
 * CAUSAL_LM for a language model, none for a masked LM.
 */
function peftTaskType(plan: Plan): 'CAUSAL_LM' | 'SEQ_CLS' | 'TOKEN_CLS' | null {
  const config = hfConfigOf(plan.model);
  if (!config) return null;
  const cfg = resolveHfConfig(config);
  if (cfg.family !== 'gpt2' && cfg.head.kind === 'sequence_classification') return 'SEQ_CLS';
  if (cfg.family !== 'gpt2' && cfg.head.kind === 'token_classification') return 'TOKEN_CLS';
  return cfg.family === 'bert' ? null : 'CAUSAL_LM';
}

/**
 * Note [LoRA advice]: LoRA changes what is trained (the base frozen, only adapters learn), so unlike the other
 * changes it is not a memory setting to reach for: it is advised for a full fine-tune that does not fit (its own
 * batch, under the `batch` goal), with LoraConfig's defaults on the model type's default targets, which is what
 * `get_peft_model(model, LoraConfig(task_type=...))` builds (where PEFT has no default: q_proj and v_proj, phi3's fused
 * qkv_proj): CAUSAL_LM for a language model, SEQ_CLS or TOKEN_CLS for a sequence or token classifier (its classifier
 * then trains as `modules_to_save`), none for a masked LM. `already_set` when the plan trains adapters or freezes parameters already; `no_default_targets` for a
 * model with no default targets here; `plan_fits` otherwise.
 */
function loraVariant(plan: Plan, fits: () => boolean): { variant: Variant } | { skip: NotApplicable } {
  const t = plan.training;
  const modelType = hfModelType(plan);
  const targets = peftDefaultTargets(modelType ?? '');
  if (t.lora || t.freeze.length > 0) return { skip: { id: 'lora', reason_id: 'already_set' } };
  if (targets === null) {
    const message = `LoRA advice needs a Hugging Face model with default target modules (PEFT's; where it has none, q_proj and v_proj; for phi3, its fused qkv_proj: ${LORA_MODEL_TYPES.join(', ')}${modelType ? `; not ${modelType}` : ''})`;
    return { skip: { id: 'lora', reason_id: 'no_default_targets', message } };
  }
  if (fits()) return { skip: { id: 'lora', reason_id: 'plan_fits' } };
  const lora = { ...PEFT_LORA_DEFAULTS, target_modules: targets, modules_to_save: [], ensure_weight_tying: false, use_dora: false, quantization: 'none' as const };
  return { variant: { id: 'lora', params: { r: lora.r, alpha: lora.alpha, target_modules: targets, task_type: peftTaskType(plan) }, plan: withTraining(plan, { lora }) } };
}

export interface AdviceOptions {
  device: DeviceSpec;
  /** `memory` (default): lower peak reserved; `batch`: a larger effective batch than `maxBatch`'s. */
  goal?: 'memory' | 'batch';
  /**
   * The plan's own peak reserved, when the caller has simulated it already (goal `memory`): for a plan that does
   * not fit, what it needs with no cap (its `needed_bytes`: Note [Advice for a plan that does not fit]).
   */
  basePeakReservedBytes?: number;
  /** Whether the plan fits, when the caller has simulated it already (goal `memory`; decides the LoRA advice). */
  baseFits?: boolean;
  /**
   * The plan's own search on the same device, every trial to steady state as `findMaxBatch` runs it by default
   * (goal `batch`; searched here when not given). Its trial at the compared batch gives the plan's peak.
   */
  maxBatch?: MaxBatchResult;
}

/** One variant's outcome, as it is known. */
export type AdviceEvent = { type: 'advice'; advice: AdviceItem } | { type: 'not_applicable'; not_applicable: NotApplicable };

/**
 * Advice before its variants run: what they are compared with and which to simulate. Plain data: a host may
 * simulate the variants in parallel (each on its own: `adviseVariant`), then rank them (`rankAdvice`).
 */
export interface AdviceSetup {
  goal: 'memory' | 'batch';
  /** The plan's own peak reserved memory, at the compared batch. */
  base_peak_reserved_bytes: number;
  /** The plan's own search (goal `batch`). */
  base_search: { max_batch: number; effective_batch: number } | null;
  /** The variants to simulate, in the order advice lists them. */
  variants: Variant[];
  /** The changes known not to apply before any variant runs. */
  not_applicable: NotApplicable[];
  /** Where each variant's search starts (goal `batch`: Note [Aimed searches]). */
  start: SearchStart | null;
}

/** What advice compares the variants with, and the variants (simulates the plan itself only where not given). */
export function setUpAdvice(plan: Plan, options: AdviceOptions): AdviceSetup {
  const goal = options.goal ?? 'memory';
  const device = options.device;
  const search = goal === 'batch' ? (options.maxBatch ?? findMaxBatch(plan, { device })) : null;
  // Under the `batch` goal the variants are compared at the largest batch that fits (or 1).
  const at = search ? withTraining(plan, { batch_size: Math.max(1, search.max_batch) }) : plan;
  const base = options.basePeakReservedBytes !== undefined && !search ? null : search ? peakOf(at, search.trials, device) : memoryMeasure(at, device);
  const { variants: candidates, not_applicable: notApplicable } = planVariants(at, { microBatch: search ? search.max_batch : plan.training.batch_size, goal, gpu: device });
  // Note [LoRA advice]: "does not fit" is the plan's own batch under the `batch` goal, its simulation otherwise.
  const lora = loraVariant(at, () => (search ? fitsBySearch(search, plan.training.batch_size) : (options.baseFits ?? base?.fits ?? peakOf(at, [], device).fits)));
  if ('variant' in lora) candidates.push(lora.variant);
  else notApplicable.push(lora.skip);
  return {
    goal,
    base_peak_reserved_bytes: base ? base.peak_reserved_bytes : options.basePeakReservedBytes!,
    base_search: search ? { max_batch: search.max_batch, effective_batch: search.effective_batch } : null,
    variants: candidates,
    not_applicable: notApplicable,
    // Each variant's search starts from the plan's (Note [Aimed searches]).
    start: search ? { batch: at.training.batch_size, bytesPerSample: bytesPerSample(search.trials) } : null,
  };
}

/*
 * Note [Advice for a plan that does not fit]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * A simulation that runs out of memory stops at the failing request: its peaks are what it reached before it,
 * about the cap whatever the plan needs. Compared by those peaks, a plan that does not fit and its variants that
 * do not either differ by noise: Llama 3.1 8B with LoRA on an RTX 4090 needs 75 GiB as planned, 42 GiB with
 * checkpointing and 50 GiB with bf16 weights, and advice said checkpointing "saves nothing" and bf16 weights "uses
 * 44 MiB more". So under the memory goal a plan, the plan itself or a variant, is measured by its peak under the cap
 * where it fits (what its GPU will show) and by what it needs with no cap where it does not (`needed_bytes`: the
 * plan simulated on its GPU with unbounded memory), and a variant saves the difference. A plan that runs out even
 * there counts as needing UNBOUNDED_MEMORY_BYTES (more, in truth).
 */
function memoryMeasure(plan: Plan, device: DeviceSpec): Omit<Trial, 'index'> {
  const r = simulate(plan, { device, timelinePoints: 0, peakDetails: false, neededOnOom: false });
  const fits = r.oom === null;
  if (fits) return { batch: plan.training.batch_size, fits, peak_allocated_bytes: r.peak_allocated_bytes, peak_reserved_bytes: r.peak_reserved_bytes, oom: null };
  const needed = neededMemory(plan, device) ?? { peak_allocated_bytes: UNBOUNDED_MEMORY_BYTES, peak_reserved_bytes: UNBOUNDED_MEMORY_BYTES };
  return { batch: plan.training.batch_size, fits, ...needed, oom: r.oom };
}

/** A search trial is the simulation advice would run (peaks only; to steady state). */
function peakOf(plan: Plan, trials: readonly Trial[], device: DeviceSpec): Omit<Trial, 'index'> {
  const tried = trials.find((t) => t.batch === plan.training.batch_size);
  if (tried) return tried;
  const r = simulate(plan, { device, timelinePoints: 0, peakDetails: false, neededOnOom: false });
  return { batch: plan.training.batch_size, fits: r.oom === null, peak_allocated_bytes: r.peak_allocated_bytes, peak_reserved_bytes: r.peak_reserved_bytes, oom: r.oom };
}

/** One variant, simulated (and searched, under the `batch` goal) on its own: its advice, or why it is not advice. */
export function adviseVariant(setup: AdviceSetup, v: Variant, device: DeviceSpec): AdviceEvent {
  const search = setup.base_search;
  const start = setup.start;
  let item: AdviceItem;
  try {
    // Under the `batch` goal a variant's own search (its largest batch only) also tries the compared batch, mostly.
    const largest = start && v.id !== 'accumulation' ? largestBatch(v.plan, { device }, start) : null;
    const r = search ? peakOf(v.plan, largest?.trials ?? [], device) : memoryMeasure(v.plan, device);
    item = { id: v.id, ...v.params, peak_allocated_bytes: r.peak_allocated_bytes, peak_reserved_bytes: r.peak_reserved_bytes, saved_bytes: setup.base_peak_reserved_bytes - r.peak_reserved_bytes, fits: r.fits } as AdviceItem;
    if (search) {
      if (v.id === 'accumulation' && r.fits) {
        // The same micro-batch with more steps fits: the largest micro-batch is the plan's (numbers that agree with its search).
        item.max_batch = v.params.micro_batch;
      } else {
        const own = largest ?? largestBatch(v.plan, { device }, { ...start!, tried: r });
        item.max_batch = own.max_batch;
        if (v.id === 'accumulation') {
          // The half micro-batch runs out with more steps too: the advice is the largest micro-batch that fits with
          // them, and its peaks are that batch's (its search simulated it), not those of the one that ran out.
          const at = own.trials.find((t) => t.batch === Math.max(1, own.max_batch)) ?? peakOf(withTraining(v.plan, { batch_size: Math.max(1, own.max_batch) }), [], device);
          Object.assign(item, { peak_allocated_bytes: at.peak_allocated_bytes, peak_reserved_bytes: at.peak_reserved_bytes, saved_bytes: setup.base_peak_reserved_bytes - at.peak_reserved_bytes, fits: at.fits });
        }
      }
      item.max_effective_batch = item.max_batch * v.plan.training.grad_accumulation_steps;
      if (v.id === 'accumulation') Object.assign(item, { micro_batch: Math.max(1, item.max_batch), effective_batch: Math.max(1, item.max_batch) * v.plan.training.grad_accumulation_steps });
    }
  } catch (error) {
    if (!(error instanceof InputError)) throw error;
    return { type: 'not_applicable', not_applicable: { id: v.id, reason_id: 'not_simulated', message: error.message } };
  }
  const reason = helps(item, search);
  if (reason) return { type: 'not_applicable', not_applicable: { id: v.id, reason_id: reason, saved_bytes: item.saved_bytes } };
  return { type: 'advice', advice: item };
}

/** The advice ranked best first, from each variant's outcome (`outcomes` in the order of `setup.variants`). */
export function rankAdvice(setup: AdviceSetup, outcomes: readonly AdviceEvent[]): AdviceResult {
  const advice: AdviceItem[] = [];
  const notApplicable = [...setup.not_applicable];
  for (const o of outcomes) {
    if (o.type === 'advice') advice.push(o.advice);
    else notApplicable.push(o.not_applicable);
  }
  const search = setup.base_search;
  const ranked = search
    ? advice.sort((x, y) => (y.max_effective_batch ?? 0) - (x.max_effective_batch ?? 0) || y.saved_bytes - x.saved_bytes)
    : advice.sort((x, y) => Number(y.fits) - Number(x.fits) || y.saved_bytes - x.saved_bytes);
  return {
    schema_version: RESULT_SCHEMA_VERSION,
    goal: setup.goal,
    base_peak_reserved_bytes: setup.base_peak_reserved_bytes,
    ...(search ? { base_max_effective_batch: search.effective_batch } : {}),
    advice: ranked,
    not_applicable: notApplicable,
  };
}

/** Simulates variant after variant, yielding each outcome; returns the advice ranked best first. */
export function* adviseSteps(plan: Plan, options: AdviceOptions): Generator<AdviceEvent, AdviceResult, void> {
  const setup = setUpAdvice(plan, options);
  for (const n of setup.not_applicable) yield { type: 'not_applicable', not_applicable: n };
  const outcomes: AdviceEvent[] = [];
  for (const v of setup.variants) {
    const outcome = adviseVariant(setup, v, options.device);
    outcomes.push(outcome);
    yield outcome;
  }
  return rankAdvice(setup, outcomes);
}

/** Why an outcome is not advice (null: it helps). */
function helps(item: AdviceItem, search: AdviceSetup['base_search']): NotApplicable['reason_id'] | null {
  if (search) return (item.max_effective_batch ?? 0) > search.effective_batch ? null : 'no_larger_batch';
  if (item.saved_bytes > 0) return null;
  return item.saved_bytes === 0 ? 'saves_nothing' : 'uses_more_memory';
}

/** All the advice at once (the CLI, tests). */
export function advise(plan: Plan, options: AdviceOptions): AdviceResult {
  const steps = adviseSteps(plan, options);
  for (;;) {
    const next = steps.next();
    if (next.done) return next.value;
  }
}
