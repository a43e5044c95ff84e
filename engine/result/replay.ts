/** A PyTorch memory snapshot replayed through the simulated allocator (engine/snapshot/replay-result.ts). */
import { z } from 'zod';
import { bytes, count, schemaVersion } from './common.ts';
import { timelineSchema } from './timeline.ts';

/** The same program replayed under other allocator settings. */
export const whatIfSchema = z.object({
  alloc_conf: z.string(),
  peak_reserved_bytes: bytes,
  peak_allocated_bytes: bytes,
  /** Index of the trace event whose allocation would fail under the cap, or null. */
  oom_at_event: count.nullable(),
  num_alloc_retries: count,
});

/** A block of a segment (`torch.cuda.memory_snapshot()`'s BlockInfo, without frames). */
export const segmentBlockSchema = z.object({
  address: count,
  size: bytes,
  requested_size: bytes,
  state: z.enum(['active_allocated', 'active_pending_free', 'inactive']),
});

/** A segment and its blocks in address order (SegmentInfo). */
export const segmentSchema = z.object({
  address: count,
  total_size: bytes,
  allocated_size: bytes,
  stream: z.number().int(),
  segment_type: z.enum(['small', 'large']),
  is_expandable: z.boolean(),
  blocks: z.array(segmentBlockSchema),
});

/** The allocator's segments when real allocated bytes first reached their peak (replayed up to that event). */
export const peakSegmentsSchema = z.object({
  event_index: count,
  allocated_bytes: bytes,
  reserved_bytes: bytes,
  segments: z.array(segmentSchema),
});

/**
 * The real run was most likely capped (set_per_process_memory_fraction) and the replay was not told: a real
 * out-of-memory error the device had room for (engine/snapshot/replay.ts, Note [A cap the replay was not given]).
 * The cap was at least `at_least_bytes` and below `below_bytes`; pass it to the replay.
 */
export const likelyCapSchema = z.object({
  oom_event: count,
  at_least_bytes: bytes,
  below_bytes: bytes,
  /** The segment frees before that error: its release-and-retry, counted among empty_cache_calls. */
  retry_release_event: count.nullable(),
});

export const replayResultSchema = z.object({
  schema_version: schemaVersion,
  kind: z.literal('replay'),
  /** Trace events replayed. */
  events: count,
  /** The allocator settings replayed (the snapshot's unless overridden). */
  alloc_conf: z.string(),
  memory_limit_bytes: bytes.nullable(),
  real_peak_allocated_bytes: bytes,
  real_peak_reserved_bytes: bytes,
  real_peak_requested_bytes: bytes,
  sim_peak_allocated_bytes: bytes,
  sim_peak_reserved_bytes: bytes,
  sim_peak_requested_bytes: bytes,
  real_segment_events: count,
  segment_event_mismatches: count,
  first_mismatch: z.object({ event_index: count, real: z.string(), simulated: z.string() }).nullable(),
  /** Events after which the simulated reserved bytes differ from the real ones. */
  reserved_mismatch_events: count,
  real_oom: z.boolean(),
  sim_oom: z.boolean(),
  /** Trace indices where empty_cache() calls were found. */
  empty_cache_calls: z.array(count),
  memory_stats: z.record(z.string(), z.number()),
  what_if: z.array(whatIfSchema),
  /** Null when a cap was given or nothing points to one; absent in results stored before memplan looked. */
  likely_cap: likelyCapSchema.nullable().optional(),
  /** Absent in results stored before memplan listed segments. */
  peak_segments: peakSegmentsSchema.optional(),
  timeline: timelineSchema,
});

export type WhatIf = z.output<typeof whatIfSchema>;
export type LikelyCap = z.output<typeof likelyCapSchema>;
export type PeakSegments = z.output<typeof peakSegmentsSchema>;
export type SegmentInfo = z.output<typeof segmentSchema>;
export type ReplayResult = z.output<typeof replayResultSchema>;
