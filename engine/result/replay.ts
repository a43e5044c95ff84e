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
  timeline: timelineSchema,
});

export type WhatIf = z.output<typeof whatIfSchema>;
export type ReplayResult = z.output<typeof replayResultSchema>;
