/**
 * A snapshot replay as the edges receive it (engine/result/replay.ts): the event-by-event comparison of
 * `replaySnapshot`, then the same program under other allocator settings (`replayWhatIf`), in one result.
 */
import type { ReplayResult } from '../result/replay.ts';
import { RESULT_SCHEMA_VERSION } from '../result/version.ts';
import { replaySnapshot, replayWhatIf, type ReplayOptions } from './replay.ts';
import type { MemorySnapshot } from './snapshot.ts';

/** The settings a replay is compared with unless the caller names others. */
export const DEFAULT_WHAT_IFS = ['', 'expandable_segments:True', 'max_split_size_mb:128', 'roundup_power2_divisions:4'];

export interface ReplayRequest extends ReplayOptions {
  /** PYTORCH_CUDA_ALLOC_CONF values to replay the program under as well (default `DEFAULT_WHAT_IFS`). */
  whatIf?: readonly string[] | undefined;
  /** Called after the comparison and after each what-if, with the fraction done (a UI's progress bar). */
  onProgress?: (fraction: number) => void;
}

/** The replay's steps one by one (a host yields to its event loop between them): the result at the end. */
export function* replaySteps(snapshot: MemorySnapshot, options: ReplayRequest = {}): Generator<number, ReplayResult, void> {
  const report = replaySnapshot(snapshot, options);
  const confs = options.whatIf ?? DEFAULT_WHAT_IFS;
  yield 1 / (confs.length + 1);
  const whatIf: ReplayResult['what_if'] = [];
  for (const conf of confs) {
    const w = replayWhatIf(snapshot, report.emptyCacheCalls, conf, { memoryLimitBytes: options.memoryLimitBytes, totalGlobalMemBytes: options.totalGlobalMemBytes });
    whatIf.push({ alloc_conf: w.allocConf, peak_reserved_bytes: w.peakReservedBytes, peak_allocated_bytes: w.peakAllocatedBytes, oom_at_event: w.oomAtEvent, num_alloc_retries: w.numAllocRetries });
    yield (whatIf.length + 1) / (confs.length + 1);
  }
  return {
    schema_version: RESULT_SCHEMA_VERSION,
    kind: 'replay',
    events: report.events,
    alloc_conf: report.allocConf,
    memory_limit_bytes: report.memoryLimitBytes,
    real_peak_allocated_bytes: report.realPeakAllocatedBytes,
    real_peak_reserved_bytes: report.realPeakReservedBytes,
    real_peak_requested_bytes: report.realPeakRequestedBytes,
    sim_peak_allocated_bytes: report.simPeakAllocatedBytes,
    sim_peak_reserved_bytes: report.simPeakReservedBytes,
    sim_peak_requested_bytes: report.simPeakRequestedBytes,
    real_segment_events: report.realSegmentEvents,
    segment_event_mismatches: report.segmentEventMismatches,
    first_mismatch: report.firstMismatch && { event_index: report.firstMismatch.eventIndex, real: report.firstMismatch.real, simulated: report.firstMismatch.simulated },
    reserved_mismatch_events: report.reservedMismatchEvents,
    real_oom: report.realOom,
    sim_oom: report.simOom,
    empty_cache_calls: report.emptyCacheCalls,
    memory_stats: report.memoryStats,
    what_if: whatIf,
    timeline: report.timeline,
  };
}

/** Replays a snapshot and the what-ifs at once (the CLI, tests). */
export function replay(snapshot: MemorySnapshot, options: ReplayRequest = {}): ReplayResult {
  const steps = replaySteps(snapshot, options);
  for (;;) {
    const next = steps.next();
    if (next.done) return next.value;
    options.onProgress?.(next.value);
  }
}
