/**
 * Advice and notes as ids with parameters, never as sentences: the renderer words each id in English and Chinese
 * (its own strings, keyed by the same ids), the CLI in English (cli/words.ts). `ADVICE_PARAMS`, `NOT_APPLICABLE_REASONS`
 * and `NOTE_PARAMS` are the list of ids and the shape of each one's parameters.
 */
import { z } from 'zod';
import { bytes, count, positiveCount, schemaVersion, signedBytes } from './common.ts';

/** Each change memplan can advise, with the parameters that say exactly what to change. */
export const ADVICE_PARAMS = {
  /** Train with autocast bf16 (precision "amp_bf16"). */
  amp_bf16: {},
  /**
   * An autocast bf16 plan's weights in bf16 (precision "bf16": the model loaded with dtype=torch.bfloat16, or cast
   * with model.to(torch.bfloat16), and trained without autocast): no fp32 weights, gradients or optimizer state. A
   * numerics change. `lora`: the plan trains LoRA adapters, which PEFT keeps in fp32 (autocast_adapter_dtype): only
   * the frozen base goes to bf16. `hugging_face`: the model is loaded with from_pretrained.
   */
  bf16_weights: { lora: z.boolean(), hugging_face: z.boolean() },
  /** Turn on non-reentrant activation checkpointing. */
  checkpointing: {},
  /** The optimizer's fused implementation (`fused=True`). */
  fused_optimizer: { optimizer: z.enum(['sgd', 'sgd_momentum', 'adam', 'adamw']) },
  /**
   * Gradient accumulation: `micro_batch` per forward/backward, `steps` of them per optimizer step,
   * `effective_batch` = micro_batch × steps, and the plan's own effective batch to compare with.
   */
  accumulation: { micro_batch: positiveCount, steps: positiveCount, effective_batch: positiveCount, plan_effective_batch: positiveCount },
  /** PYTORCH_CUDA_ALLOC_CONF with expandable segments; `alloc_conf` is the whole setting to use. */
  expandable_segments: { alloc_conf: z.string() },
  /** scaled_dot_product_attention instead of eager attention. */
  sdpa: {},
  /**
   * A full fine-tune that does not fit, as LoRA (`training.lora`): PEFT's `LoraConfig` defaults (r 8, lora_alpha 8,
   * no dropout) on the model type's default `target_modules` (engine/models/peft/lora.ts, `peftDefaultTargets`).
   * A different fine-tune, not a memory setting: advised only when the plan does not fit.
   */
  lora: {
    r: positiveCount,
    alpha: z.number().positive(),
    target_modules: z.array(z.string()),
    /** PEFT's `task_type` for the model's head: SEQ_CLS and TOKEN_CLS keep a classifier trainable (`modules_to_save`); null for a masked LM. */
    task_type: z.enum(['CAUSAL_LM', 'SEQ_CLS', 'TOKEN_CLS']).nullable().default(null),
  },
} as const;

export type AdviceId = keyof typeof ADVICE_PARAMS;
export const ADVICE_IDS = Object.keys(ADVICE_PARAMS) as [AdviceId, ...AdviceId[]];

/**
 * What a variant was simulated to need (and, for a max-batch search, the largest batch it fits). Under the memory
 * goal, the peaks of a variant that does not fit, and the plan's own when it does not, are what it needs with no
 * cap (needed_bytes), not the peaks reached before the error (Note [Advice for a plan that does not fit]).
 */
const adviceMeasures = {
  peak_allocated_bytes: bytes,
  peak_reserved_bytes: bytes,
  /** Peak reserved saved against the plan as it is (positive: less memory). */
  saved_bytes: signedBytes,
  fits: z.boolean(),
  /** With a max-batch search: the largest micro-batch with this change, and micro-batch × accumulation steps. */
  max_batch: count.optional(),
  max_effective_batch: count.optional(),
};

const advice = <Id extends AdviceId>(id: Id) => z.object({ id: z.literal(id), ...(ADVICE_PARAMS[id] as (typeof ADVICE_PARAMS)[Id]), ...adviceMeasures });

export const adviceItemSchema = z.discriminatedUnion('id', [
  advice('amp_bf16'),
  advice('bf16_weights'),
  advice('checkpointing'),
  advice('fused_optimizer'),
  advice('accumulation'),
  advice('expandable_segments'),
  advice('sdpa'),
  advice('lora'),
]);

/** Why a change is not advised for this plan. */
export const NOT_APPLICABLE_REASONS = [
  /** The plan does it already. */
  'already_set',
  /** Plain SGD keeps no optimizer state: nothing for a fused optimizer to save. */
  'no_optimizer_state',
  /** The micro-batch is 1: it cannot be split. */
  'batch_of_one',
  /** Simulated: the peak reserved memory does not go down. */
  'saves_nothing',
  /** Simulated: the peak reserved memory goes up (`saved_bytes` says by how much). */
  'uses_more_memory',
  /** Searched: the largest effective batch does not grow. */
  'no_larger_batch',
  /** The engine cannot simulate this change for this model yet (`message` says why). */
  'not_simulated',
  /** PyTorch fails the step this change makes (`message` says how: a regression head on bf16 weights, expandable segments with an odd large_segment_size_mb). */
  'fails_in_pytorch',
  /** The plan fits as it is: a change of what is trained (LoRA) is not advised for memory it does not need. */
  'plan_fits',
  /** LoRA: PEFT has no default target modules for this model (LoRA is advised with PEFT's defaults only). */
  'no_default_targets',
  /** bf16 weights: advised for plans that train with autocast bf16 only (fp32 plans: autocast bf16 first). */
  'needs_amp_bf16',
  /** Autocast bf16 and bf16 weights on a GPU without bf16 arithmetic (V100, T4): PyTorch emulates it, far slower. */
  'gpu_without_bf16',
] as const;

export const notApplicableSchema = z.object({
  id: z.enum(ADVICE_IDS),
  reason_id: z.enum(NOT_APPLICABLE_REASONS),
  saved_bytes: signedBytes.optional(),
  message: z.string().optional(),
});

/**
 * The advice for a plan: the changes that help, best first, and why the others are not listed. `goal` says what
 * "help" means: `memory` (a simulation: lower peak reserved) or `batch` (after a search: a larger effective batch).
 */
export const adviceResultSchema = z.object({
  schema_version: schemaVersion,
  goal: z.enum(['memory', 'batch']),
  base_peak_reserved_bytes: bytes,
  /** With goal `batch`: the plan's largest effective batch, which each item is compared with. */
  base_max_effective_batch: count.optional(),
  advice: z.array(adviceItemSchema),
  not_applicable: z.array(notApplicableSchema),
});

/**
 * Why an answer comes without its advice (the CLI computes it by default only for a plan that does not fit: README,
 * "Advice"): the plan fits (`plan_fits`; for `max-batch`, its own batch does), or `--no-advice` was given
 * (`no_advice`). `changes`: how many changes `--advice` would simulate or search.
 */
export const adviceNotComputedSchema = z.object({
  reason: z.enum(['plan_fits', 'no_advice']),
  changes: count,
});

/** Notes beside a result: facts about how memplan simulated it that a user should know. */
export const NOTE_PARAMS = {
  /**
   * Parameters are created in their training dtype and moved to the GPU one by one in module order, as
   * `from_pretrained(..., dtype=...)` then `.to("cuda")` does; building in fp32 on the GPU and casting reserves more.
   */
  parameters_loaded_in_training_dtype: {},
  /** The simulation stopped at PyTorch's out-of-memory error: the peaks are those reached before it. */
  stopped_at_oom: { step: count, phase: z.string() },
  /** A memory cap larger than the GPU: simulated as a custom GPU of that size (the named GPU's other figures). */
  custom_gpu_from_cap: { base_gpu: z.string(), memory_limit_bytes: bytes },
  /**
   * The allocator's state did not repeat within the steps simulated (Note [Steady state]), so later steps are not
   * proven to fit: stopped at 20 steps, at the work limit, or with garbage collection on (its ages never repeat).
   */
  not_steady: { steps: count, reason: z.enum(['max_steps', 'work_limit', 'garbage_collection']) },
  /**
   * Reentrant checkpointing whose blocks' input needs no gradient (the embedding frozen, no
   * `enable_input_require_grads`): PyTorch computes no gradient inside those blocks (it warns "None of the inputs
   * have requires_grad=True"), and memplan simulates just that; `blocks` of them in each forward.
   */
  checkpoint_inputs_no_grad: { blocks: count },
  /**
   * LoRA target names no module of the model matched while others did (PEFT says nothing: it raises only when none
   * matches), so fewer modules are adapted than the plan may mean: likely a typo or another model's names.
   */
  lora_targets_unmatched: { targets: z.array(z.string()) },
  /**
   * modules_to_save names no module's name ends with: PEFT copies nothing for them, with no word, so those modules
   * stay frozen.
   */
  lora_modules_to_save_unmatched: { modules: z.array(z.string()) },
  /**
   * The plan runs out of memory even with no cap on a GPU of `bytes` (64 TiB, the most memplan simulates): it needs
   * more than that, so `needed_bytes` is null rather than the peak reached before the error.
   */
  needs_more_than_simulated: { bytes },
} as const;

export type NoteId = keyof typeof NOTE_PARAMS;
export const NOTE_IDS = Object.keys(NOTE_PARAMS) as [NoteId, ...NoteId[]];
const note = <Id extends NoteId>(id: Id) => z.object({ id: z.literal(id), ...(NOTE_PARAMS[id] as (typeof NOTE_PARAMS)[Id]) });
export const noteSchema = z.discriminatedUnion('id', [
  note('parameters_loaded_in_training_dtype'),
  note('stopped_at_oom'),
  note('custom_gpu_from_cap'),
  note('not_steady'),
  note('checkpoint_inputs_no_grad'),
  note('lora_targets_unmatched'),
  note('lora_modules_to_save_unmatched'),
  note('needs_more_than_simulated'),
]);

export type AdviceItem = z.output<typeof adviceItemSchema>;
export type NotApplicable = z.output<typeof notApplicableSchema>;
export type NotApplicableReason = (typeof NOT_APPLICABLE_REASONS)[number];
export type AdviceResult = z.output<typeof adviceResultSchema>;
export type AdviceNotComputed = z.output<typeof adviceNotComputedSchema>;
export type Note = z.output<typeof noteSchema>;
/** One advice id's item, e.g. `AdviceOf<'accumulation'>` has `micro_batch`, `steps`, `effective_batch`. */
export type AdviceOf<Id extends AdviceId> = Extract<AdviceItem, { id: Id }>;
export type NoteOf<Id extends NoteId> = Extract<Note, { id: Id }>;
