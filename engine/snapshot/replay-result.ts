/**
 * A snapshot replay as the edges receive it (engine/result/replay.ts): the event-by-event comparison of
 * `replaySnapshot`, then the same program under other allocator settings (`replayWhatIf`), in one result.
 */
import type { ReplayResult } from '../result/replay.ts';
import { RESULT_SCHEMA_VERSION } from '../result/version.ts';
import { replaySnapshotSteps, replayWhatIfSteps, type ReplayOptions } from './replay.ts';
import type { MemorySnapshot } from './snapshot.ts';

/** The settings a replay is compared with unless the caller names others. */
export const DEFAULT_WHAT_IFS = ['', 'expandable_segments:True', 'max_split_size_mb:128', 'roundup_power2_divisions:4'];

export interface ReplayRequest extends ReplayOptions {
  /** PYTORCH_CUDA_ALLOC_CONF values to replay the program under as well (default `DEFAULT_WHAT_IFS`). */
  whatIf?: readonly string[] | undefined;
  /** Called as the replay goes, with the fraction done (a UI's progress bar). */
  onProgress?: (fraction: number) => void;
}

/** Where a replay is: comparing with the real run, listing the segments at the peak, or one of the what-ifs. */
export interface ReplayProgress {
  stage: 'replay' | 'segments' | 'what_if';
  /** Of the whole replay (every stage). */
  fraction: number;
}

/**
 * The replay's steps (a host yields to its event loop between them): the comparison, the segments at the peak,
 * then each what-if, each yielding every REPLAY_EVENTS_PER_STEP events; the result at the end. The comparison and
 * each what-if weigh one trace each; the segments, up to the peak.
 */
export function* replaySteps(snapshot: MemorySnapshot, options: ReplayRequest = {}): Generator<ReplayProgress, ReplayResult, void> {
  const confs = options.whatIf ?? DEFAULT_WHAT_IFS;
  const total = confs.length + 2;
  const report = yield* staged(replaySnapshotSteps(snapshot, options), 'replay', 0, total);
  const atPeak = yield* staged(
    replayWhatIfSteps(snapshot, report.emptyCacheCalls, report.allocConf, { ...limits(options), segmentsAtEvent: report.realPeakAllocatedEvent }),
    'segments',
    1,
    total,
  );
  const segments = atPeak.segments ?? [];
  const whatIf: ReplayResult['what_if'] = [];
  for (const conf of confs) {
    const w = yield* staged(replayWhatIfSteps(snapshot, report.emptyCacheCalls, conf, limits(options)), 'what_if', whatIf.length + 2, total);
    whatIf.push({ alloc_conf: w.allocConf, peak_reserved_bytes: w.peakReservedBytes, peak_allocated_bytes: w.peakAllocatedBytes, oom_at_event: w.oomAtEvent, num_alloc_retries: w.numAllocRetries });
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
    likely_cap: report.uncappedOom && {
      oom_event: report.uncappedOom.eventIndex,
      at_least_bytes: report.realPeakReservedBytes,
      below_bytes: report.uncappedOom.realReservedBytes + report.uncappedOom.segmentBytes,
      retry_release_event: report.uncappedOom.retryReleaseEvent,
    },
    peak_segments: {
      event_index: report.realPeakAllocatedEvent,
      allocated_bytes: segments.reduce((sum, s) => sum + s.allocated_size, 0),
      reserved_bytes: segments.reduce((sum, s) => sum + s.total_size, 0),
      segments,
    },
    timeline: report.timeline,
  };
}

function limits(options: ReplayRequest): { memoryLimitBytes?: number | undefined; totalGlobalMemBytes?: number | undefined } {
  return { memoryLimitBytes: options.memoryLimitBytes, totalGlobalMemBytes: options.totalGlobalMemBytes };
}

/** Runs one stage's steps, reporting its progress as a share (`index` of `total`) of the whole replay. */
function* staged<T>(steps: Generator<number, T, void>, stage: ReplayProgress['stage'], index: number, total: number): Generator<ReplayProgress, T, void> {
  for (;;) {
    const next = steps.next();
    if (next.done) {
      yield { stage, fraction: (index + 1) / total };
      return next.value;
    }
    yield { stage, fraction: (index + next.value) / total };
  }
}

/** Replays a snapshot and the what-ifs at once (the CLI, tests). */
export function replay(snapshot: MemorySnapshot, options: ReplayRequest = {}): ReplayResult {
  const steps = replaySteps(snapshot, options);
  for (;;) {
    const next = steps.next();
    if (next.done) return next.value;
    options.onProgress?.(next.value.fraction);
  }
}
