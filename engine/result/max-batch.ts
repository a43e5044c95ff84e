/** The largest batch that fits a GPU (engine/search/max-batch.ts): each trial, then the answer. */
import { z } from 'zod';
import { caveatsSchema } from './caveats.ts';
import { bytes, count, liveTensorSchema, oomSchema, positiveCount, schemaVersion } from './common.ts';
import { gpuUsedSchema } from './simulate.ts';

/** One batch simulated during the search. */
export const trialSchema = z.object({
  /** 1, 2, ... in the order the trials ran. */
  index: positiveCount,
  batch: positiveCount,
  fits: z.boolean(),
  peak_allocated_bytes: bytes,
  peak_reserved_bytes: bytes,
  /** Where the OOM happened, for a batch that does not fit. */
  oom: oomSchema.nullable(),
});

/** Why the recommended batch is what it is. */
export const RECOMMENDATION_REASONS = [
  /** The largest batch whose peak reserved leaves the safety margin of the cap free. */
  'keeps_margin',
  /** No fitting batch leaves the margin free: the recommendation is the largest that fits, with less room (`headroom_bytes`). */
  'margin_not_kept',
  /** Even a batch of 1 runs out of memory. */
  'nothing_fits',
] as const;

export const recommendationSchema = z.object({
  /** 0 only when nothing fits. */
  batch: count,
  reason_id: z.enum(RECOMMENDATION_REASONS),
  /** The safety margin as a fraction of the cap, and in bytes. */
  safety_margin: z.number().min(0).lt(1),
  margin_bytes: bytes,
  /** cap_bytes less the recommended batch's peak reserved. */
  headroom_bytes: z.number().int(),
  /** The multiple the recommendation was rounded down to (1: not rounded). */
  multiple_of: positiveCount,
});

/**
 * Fit is not always monotonic near the limit (measured on the H100, fresh processes: an AMP bf16 MLP under 3 GiB
 * fits at 6272, runs out at 6273 and fits again at 6528; BERT-large under 16 GiB runs out at 44 and fits at 45-47).
 * When the search finds a batch that fits above one that runs out, this is the region between them.
 */
export const unstableRegionSchema = z.object({
  /** The smallest batch tried that runs out of memory below max_batch. */
  from_batch: positiveCount,
  /** max_batch: the largest batch that fits. */
  to_batch: positiveCount,
  /** The batches tried in [from_batch, to_batch] that run out, and those that fit. */
  failing_batches: z.array(positiveCount),
  fitting_batches: z.array(positiveCount),
});

/** What a plan that does not fit at batch 1 needs (`max_batch` 0). */
export const neededSchema = z.object({
  /**
   * Batch 1 simulated on the plan's GPU with no cap and unbounded memory: its peak reserved and allocated; null when
   * it runs out even there (it needs more than `more_than_bytes`, the most memplan simulates).
   */
  peak_reserved_bytes: bytes.nullable(),
  peak_allocated_bytes: bytes.nullable(),
  more_than_bytes: bytes.nullable().default(null),
  /** The catalog GPUs (ids) where batch 1 fits, with the memory PyTorch can use on each; [] when none does. */
  fits_on: z.array(z.object({ id: z.string(), name: z.string(), available_bytes: bytes })),
});

export const maxBatchResultSchema = z.object({
  schema_version: schemaVersion,
  kind: z.literal('max_batch'),
  plan_name: z.string(),
  gpu: gpuUsedSchema,
  cap_bytes: bytes,
  /** Largest micro-batch that fits (0 when none does). */
  max_batch: count,
  grad_accumulation_steps: positiveCount,
  /** max_batch × grad_accumulation_steps. */
  effective_batch: count,
  recommendation: recommendationSchema,
  /** Every trial in the order it ran. */
  trials: z.array(trialSchema),
  /** The search stopped at its upper bound: the batch could be larger still. */
  reached_upper_bound: z.boolean(),
  /** What fills memory at the peak of the largest fitting batch. */
  limited_by: z.object({ step: count, phase: z.string(), largest: z.array(liveTensorSchema) }).nullable(),
  /** Fitting batches above a failing one (null: none found); absent in results stored before memplan reported it. */
  unstable_region: unstableRegionSchema.nullable().default(null),
  /** When nothing fits: what the plan needs and where it fits (null otherwise). */
  needed: neededSchema.nullable().default(null),
  /** What the answer assumes and how sure memplan is (caveats.ts); absent in results stored before memplan reported them. */
  caveats: caveatsSchema.nullable().default(null),
});

export type Trial = z.output<typeof trialSchema>;
export type Recommendation = z.output<typeof recommendationSchema>;
export type RecommendationReason = (typeof RECOMMENDATION_REASONS)[number];
export type MaxBatchResult = z.output<typeof maxBatchResultSchema>;
export type UnstableRegion = z.output<typeof unstableRegionSchema>;
export type Needed = z.output<typeof neededSchema>;
