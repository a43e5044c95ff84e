/**
 * Replay of a real PyTorch memory trace through the simulated caching allocator.
 *
 * Each `alloc` and `free_*` of the real trace is fed to the simulator; the segment events (`segment_alloc`,
 * `segment_free`, `segment_map`, `segment_unmap`) and `oom`s the simulator produces are compared, in order and
 * size, with the real ones, and reserved bytes after every event. The allocator is deterministic, so a faithful
 * simulator reproduces every segment the real run created and released.
 *
 * Note [empty_cache in a trace]: `torch.cuda.empty_cache()` leaves no entry of its own; it shows as a run of
 * `segment_free`/`segment_unmap` that no allocation asked for. The release-and-retry path of an allocation that
 * hit the memory cap shows the same way just before that allocation's `segment_alloc`. The replay tells them
 * apart by asking the simulator whether the next allocation would need to release memory; if not, the run is
 * an empty_cache() call. (Both end in the same state: release_cached_blocks then alloc_block.) Garbage
 * collection (garbage_collection_threshold under a cap) frees segments at the start of an allocation too.
 *
 * Note [Replay addresses]: where the simulator creates the same segment as the real run, it takes the real
 * address, so best fit breaks ties between equal blocks as the real run did.
 *
 * Note [A cap the replay was not given]: snapshots do not record set_per_process_memory_fraction. A real `oom`
 * whose allocation the simulated device can satisfy (the device had `device_free` bytes left, as the trace says)
 * was refused by a cap: PyTorch's alloc_block fails when `total_allocated_memory + size > allowed_memory_maximum`.
 * The cap was then at least the real peak reserved and below the reserved bytes at the failure plus the segment
 * the allocation needed. The segments freed just before such an `oom` are the failing allocation's
 * release-and-retry (release_cached_blocks), which without the cap look like an empty_cache() call.
 *
 * The what-if replays (`replayWhatIf`) follow the trace exactly as the comparison does (its `oom` events and
 * empty_cache() calls included, an allocation that fails left missing), so the snapshot's own settings give the
 * comparison's numbers.
 */
import { CachingAllocator, OutOfMemoryError, type SegmentInfo, type TraceEvent } from '../allocator/caching-allocator.ts';
import type { Block } from '../allocator/block.ts';
import { fractionCapBytes, parseAllocatorConf, formatAllocatorConf } from '../allocator/config.ts';
import type { DeviceMemory } from '../allocator/device-memory.ts';
import { SimulatedDevice } from '../allocator/device-memory.ts';
import type { MemorySnapshot, SnapshotTraceEvent } from './snapshot.ts';
import { InputError } from '../errors.ts';
import { allocatorConfFromSettings } from './snapshot.ts';
import { DEFAULT_TIMELINE_POINTS, TimelineRecorder, decimateTimeline, type Timeline } from '../result/timeline.ts';

/** A trace that frees one address twice without allocating it again: not what PyTorch records (an edited or corrupt file). */
function freedTwice(index: number, e: SnapshotTraceEvent): InputError {
  return new InputError(`snapshot.device_traces event ${index}`, `free_requested of address 0x${e.addr.toString(16)}, which the trace already freed: the trace is inconsistent (a corrupt or edited snapshot)`);
}

export interface ReplayOptions {
  /** PYTORCH_CUDA_ALLOC_CONF; default: the snapshot's allocator_settings. */
  allocConf?: string | undefined;
  /** The cap set_per_process_memory_fraction imposed (snapshots do not record it). */
  memoryLimitBytes?: number | undefined;
  /** totalGlobalMem of the GPU (sizes expandable segments' address ranges); default 80 GiB. */
  totalGlobalMemBytes?: number | undefined;
  /** Decimate the timeline to about this many points (default 2000). */
  timelinePoints?: number | undefined;
}

export interface SegmentEventMismatch {
  /** Index in the replayed trace of the event where the difference shows. */
  eventIndex: number;
  real: string;
  simulated: string;
}

export interface ReplayReport {
  events: number;
  allocConf: string;
  memoryLimitBytes: number | null;
  realPeakReservedBytes: number;
  /** Peak of real allocated bytes, each block sized as the simulator sized it (exact while in sync). */
  realPeakAllocatedBytes: number;
  realPeakRequestedBytes: number;
  /** Index of the event after which real allocated bytes first reached their peak. */
  realPeakAllocatedEvent: number;
  simPeakAllocatedBytes: number;
  simPeakReservedBytes: number;
  simPeakRequestedBytes: number;
  realSegmentEvents: number;
  segmentEventMismatches: number;
  firstMismatch: SegmentEventMismatch | null;
  /** Events after which simulated reserved bytes differ from real ones. */
  reservedMismatchEvents: number;
  realOom: boolean;
  simOom: boolean;
  /** Where empty_cache() calls were found (event indices). */
  emptyCacheCalls: number[];
  /** The first real `oom` that only a cap explains (Note [A cap the replay was not given]); null when a cap was given. */
  uncappedOom: UncappedOom | null;
  memoryStats: Record<string, number>;
  /** Allocated and reserved (simulated and real) after each event, min/max-decimated (engine/result/timeline.ts). */
  timeline: Timeline;
}

const kDefaultTotalGlobalMem = 85_899_345_920; // 80 GiB

/** A real out-of-memory error the simulated device, without a cap, did not raise. */
export interface UncappedOom {
  eventIndex: number;
  /** Real reserved bytes when the allocation failed (after its release-and-retry). */
  realReservedBytes: number;
  /** What the simulator reserved to satisfy it. */
  segmentBytes: number;
  /** The segment frees just before it, counted in emptyCacheCalls: the allocation's release-and-retry. */
  retryReleaseEvent: number | null;
}

/**
 * The device of a replay: a new segment takes the address of the real run's next segment of the same size that
 * is not in use, so a replay in step with the real run reproduces its layout exactly (Note [Replay addresses]),
 * and a what-if replay under other settings stays as close to it as its segments allow.
 */
class TraceAddressDevice extends SimulatedDevice {
  private readonly realBySize = new Map<number, number[]>();
  private readonly inUse = new Set<number>();
  private readonly ownAddresses = new Set<number>();

  constructor(trace: readonly SnapshotTraceEvent[]) {
    super();
    for (const e of trace) {
      if (e.action !== 'segment_alloc') continue;
      const list = this.realBySize.get(e.size) ?? [];
      list.push(e.addr);
      this.realBySize.set(e.size, list);
    }
  }

  protected override addressFor(size: number): number {
    const list = this.realBySize.get(size);
    const i = list ? list.findIndex((addr) => !this.inUse.has(addr)) : -1;
    if (list && i >= 0) {
      const addr = list.splice(i, 1)[0]!;
      this.inUse.add(addr);
      return addr;
    }
    const ptr = super.addressFor(size);
    this.ownAddresses.add(ptr);
    return ptr;
  }

  protected override releaseAddress(ptr: number, size: number): void {
    this.inUse.delete(ptr);
    if (this.ownAddresses.delete(ptr)) super.releaseAddress(ptr, size);
  }
}

function describe(e: { action: string; size: number }): string {
  return `${e.action} of ${e.size} bytes`;
}

/** Trace events replayed between two yields of the `...Steps` generators (a few milliseconds of work). */
export const REPLAY_EVENTS_PER_STEP = 100_000;

/** Runs a generator of progress to its end (the CLI and tests need no pauses). */
function drive<T>(steps: Generator<number, T, void>): T {
  for (;;) {
    const next = steps.next();
    if (next.done) return next.value;
  }
}

/** Replays the snapshot's trace and compares it event by event with what the simulator does. */
export function replaySnapshot(snapshot: MemorySnapshot, options: ReplayOptions = {}): ReplayReport {
  return drive(replaySnapshotSteps(snapshot, options));
}

/** `replaySnapshot` in steps: yields the fraction of the trace replayed every REPLAY_EVENTS_PER_STEP events. */
export function* replaySnapshotSteps(snapshot: MemorySnapshot, options: ReplayOptions = {}): Generator<number, ReplayReport, void> {
  const allocConf = options.allocConf ?? allocatorConfFromSettings(snapshot.allocatorSettings);
  // the snapshot's own settings as its PyTorch read them; settings typed for it as PyTorch 2.11 reads them (a typo is said)
  const config = options.allocConf === undefined ? parseAllocatorConf(allocConf, 'snapshot allocator_settings', { recorded: true }) : parseAllocatorConf(allocConf, 'alloc conf', { fractionIsCap: true });
  const device = new TraceAddressDevice(snapshot.trace);
  const simEvents: TraceEvent[] = [];
  const totalGlobalMemBytes = options.totalGlobalMemBytes ?? kDefaultTotalGlobalMem;
  // a cap given, else the one the recorded settings' per_process_memory_fraction set
  const memoryLimitBytes = options.memoryLimitBytes ?? fractionCapBytes(config, totalGlobalMemBytes);
  const allocator = new CachingAllocator({
    config,
    device,
    totalGlobalMemBytes,
    memoryLimitBytes,
    onTrace: (action, addr, size, stream) => {
      if (action !== 'alloc' && action !== 'free_requested' && action !== 'free_completed') simEvents.push({ action, addr, size, stream });
    },
  });
  const trace = snapshot.trace;
  const blocks = new Map<number, Block>(); // real address -> simulated block
  let realReserved = 0;
  let realAllocated = 0;
  let realRequested = 0;
  let realPeakReserved = 0;
  let realPeakAllocated = 0;
  let realPeakRequested = 0;
  let realPeakAllocatedEvent = 0;
  let realSegmentEvents = 0;
  let mismatches = 0;
  let reservedMismatchEvents = 0;
  let firstMismatch: SegmentEventMismatch | null = null;
  let realOom = false;
  let simOom = false;
  const emptyCacheCalls: number[] = [];
  let uncappedOom: UncappedOom | null = null;
  const realPending: SnapshotTraceEvent[] = [];
  const timeline = new TimelineRecorder(0, true); // every event: decimation keeps each bucket's min and max

  const noteMismatch = (eventIndex: number, real: string, simulated: string) => {
    mismatches++;
    firstMismatch ??= { eventIndex, real, simulated };
  };

  /** Compares the real segment events of one group with the simulator's. */
  const settle = (eventIndex: number) => {
    if (realPending.length === 0 && simEvents.length === 0) return;
    const n = Math.max(realPending.length, simEvents.length);
    for (let k = 0; k < n; k++) {
      const r = realPending[k];
      const s = simEvents[k];
      if (!r || !s || r.action !== s.action || r.size !== s.size) {
        noteMismatch(eventIndex, r ? describe(r) : 'nothing', s ? describe(s) : 'nothing');
      }
    }
    realPending.length = 0;
    simEvents.length = 0;
  };

  /** Next alloc or oom after index i: the allocation a run of segment frees may belong to. */
  const nextAllocation = (i: number): SnapshotTraceEvent | undefined => {
    for (let j = i + 1; j < trace.length; j++) {
      const a = trace[j]!.action;
      if (a === 'alloc' || a === 'oom') return trace[j];
      if (a === 'free_requested' || a === 'free_completed') return undefined;
    }
    return undefined;
  };

  for (let i = 0; i < trace.length; i++) {
    if (i % REPLAY_EVENTS_PER_STEP === REPLAY_EVENTS_PER_STEP - 1) yield i / trace.length;
    const e = trace[i]!;
    switch (e.action) {
      case 'segment_alloc':
      case 'segment_map':
        realSegmentEvents++;
        realReserved += e.size;
        if (realReserved > realPeakReserved) realPeakReserved = realReserved;
        realPending.push(e);
        break;
      case 'segment_free':
      case 'segment_unmap': {
        realSegmentEvents++;
        const startsGroup = realPending.length === 0;
        realReserved -= e.size;
        realPending.push(e);
        if (startsGroup) {
          // Note [empty_cache in a trace]
          const next = nextAllocation(i);
          if (next === undefined || !allocator.wouldReleaseCachedMemory(next.size, next.stream)) {
            allocator.emptyCache();
            emptyCacheCalls.push(i);
          }
        }
        break;
      }
      case 'alloc': {
        let block: Block;
        try {
          block = allocator.malloc(e.size, e.stream);
        } catch (error) {
          if (!(error instanceof OutOfMemoryError)) throw error;
          simOom = true; // the real run went on; this allocation stays missing from the simulation
          settle(i);
          break;
        }
        settle(i);
        blocks.set(e.addr, block);
        realAllocated += block.size;
        realRequested += e.size;
        if (realAllocated > realPeakAllocated) {
          realPeakAllocated = realAllocated;
          realPeakAllocatedEvent = i;
        }
        if (realRequested > realPeakRequested) realPeakRequested = realRequested;
        break;
      }
      case 'free_requested': {
        settle(i);
        const block = blocks.get(e.addr);
        if (!block) break; // allocated before recording started
        if (!block.allocated) throw freedTwice(i, e);
        realAllocated -= block.size; // still allocated: its size is the one it was handed out with
        allocator.requestFree(block);
        realRequested -= e.size;
        break;
      }
      case 'free_completed': {
        settle(i);
        const block = blocks.get(e.addr);
        if (!block) break;
        if (block.allocated) allocator.requestFree(block); // a trace that left out free_requested
        allocator.completeFree(block);
        blocks.delete(e.addr);
        break;
      }
      case 'oom': {
        realOom = true;
        // The real device had e.deviceFree bytes left; the simulator's device gets the same.
        if (memoryLimitBytes === undefined) device.capacityBytes = allocator.reservedBytes + e.deviceFree;
        try {
          const block = allocator.malloc(e.size, e.stream);
          allocator.free(block); // the real program got an OOM here: nothing stays allocated
          if (memoryLimitBytes === undefined && uncappedOom === null) {
            // Note [A cap the replay was not given]
            const release = emptyCacheCalls.at(-1);
            uncappedOom = {
              eventIndex: i,
              realReservedBytes: realReserved,
              segmentBytes: simEvents.reduce((sum, s) => sum + (s.action === 'segment_alloc' || s.action === 'segment_map' ? s.size : 0), 0),
              retryReleaseEvent: release !== undefined && nextAllocation(release) === e ? release : null,
            };
          }
        } catch (error) {
          if (!(error instanceof OutOfMemoryError)) throw error;
          simOom = true;
        }
        realPending.push(e);
        settle(i);
        break;
      }
    }
    if (allocator.reservedBytes !== realReserved && realPending.length === 0) reservedMismatchEvents++;
    timeline.push(allocator.allocatedBytes, allocator.reservedBytes, 0, 'trace', realReserved);
  }
  settle(trace.length);

  const stats = allocator.stats;
  return {
    events: trace.length,
    allocConf: formatAllocatorConf(config),
    memoryLimitBytes: memoryLimitBytes ?? null,
    realPeakReservedBytes: realPeakReserved,
    realPeakAllocatedBytes: realPeakAllocated,
    realPeakRequestedBytes: realPeakRequested,
    realPeakAllocatedEvent,
    simPeakAllocatedBytes: stats.allocated_bytes[0].peak,
    simPeakReservedBytes: stats.reserved_bytes[0].peak,
    simPeakRequestedBytes: stats.requested_bytes[0].peak,
    realSegmentEvents,
    segmentEventMismatches: mismatches,
    firstMismatch,
    reservedMismatchEvents,
    realOom,
    simOom,
    emptyCacheCalls,
    uncappedOom,
    memoryStats: allocator.memoryStats(),
    timeline: decimateTimeline(timeline.raw(), options.timelinePoints ?? DEFAULT_TIMELINE_POINTS),
  };
}

export interface WhatIfResult {
  allocConf: string;
  peakReservedBytes: number;
  peakAllocatedBytes: number;
  /** Index of the event whose allocation would fail under the cap, or null. */
  oomAtEvent: number | null;
  numAllocRetries: number;
  /** The segments after event `segmentsAtEvent` (when asked for; the replay stops there). */
  segments: SegmentInfo[] | null;
}

/**
 * Replays the trace's allocations and frees (and its empty_cache() calls, found by replaySnapshot, and its
 * out-of-memory errors) under other allocator settings: what the same program would have reserved with, e.g.,
 * expandable_segments:True. It goes on past an allocation that fails, as the comparison does (`oomAtEvent` is
 * the first), so under the snapshot's own settings it gives the comparison's peaks and out-of-memory.
 */
export function replayWhatIf(snapshot: MemorySnapshot, emptyCacheCalls: readonly number[], allocConf: string, options: WhatIfOptions = {}): WhatIfResult {
  return drive(replayWhatIfSteps(snapshot, emptyCacheCalls, allocConf, options));
}

export interface WhatIfOptions {
  memoryLimitBytes?: number | undefined;
  totalGlobalMemBytes?: number | undefined;
  /** Stop after this event and list the allocator's segments then (the segments at the peak). */
  segmentsAtEvent?: number | undefined;
}

/** `replayWhatIf` in steps: yields the fraction of the trace replayed every REPLAY_EVENTS_PER_STEP events. */
export function* replayWhatIfSteps(
  snapshot: MemorySnapshot,
  emptyCacheCalls: readonly number[],
  allocConf: string,
  options: WhatIfOptions = {},
): Generator<number, WhatIfResult, void> {
  const config = parseAllocatorConf(allocConf, 'alloc conf', { fractionIsCap: true });
  const device = new TraceAddressDevice(snapshot.trace);
  const totalGlobalMemBytes = options.totalGlobalMemBytes ?? kDefaultTotalGlobalMem;
  const memoryLimitBytes = options.memoryLimitBytes ?? fractionCapBytes(config, totalGlobalMemBytes);
  const allocator = new CachingAllocator({
    config,
    device,
    totalGlobalMemBytes,
    memoryLimitBytes,
  });
  const emptyCacheAt = new Set(emptyCacheCalls);
  const blocks = new Map<number, Block>();
  let oomAtEvent: number | null = null;
  const trace = snapshot.trace;
  const last = Math.min(trace.length - 1, options.segmentsAtEvent ?? Infinity);
  for (let i = 0; i <= last; i++) {
    if (i % REPLAY_EVENTS_PER_STEP === REPLAY_EVENTS_PER_STEP - 1) yield i / (last + 1);
    const e = trace[i]!;
    if (emptyCacheAt.has(i)) allocator.emptyCache();
    if (e.action === 'alloc') {
      try {
        blocks.set(e.addr, allocator.malloc(e.size, e.stream));
      } catch (error) {
        if (!(error instanceof OutOfMemoryError)) throw error;
        oomAtEvent ??= i; // the allocation stays missing, as in replaySnapshot
      }
    } else if (e.action === 'free_requested') {
      const block = blocks.get(e.addr);
      if (block && !block.allocated) throw freedTwice(i, e);
      if (block) allocator.requestFree(block);
    } else if (e.action === 'free_completed') {
      const block = blocks.get(e.addr);
      if (block) {
        if (block.allocated) allocator.requestFree(block); // a trace that left out free_requested
        allocator.completeFree(block);
        blocks.delete(e.addr);
      }
    } else if (e.action === 'oom') {
      // The real program got an OOM here and went on: the same attempt as in replaySnapshot.
      if (memoryLimitBytes === undefined) device.capacityBytes = allocator.reservedBytes + e.deviceFree;
      try {
        allocator.free(allocator.malloc(e.size, e.stream));
      } catch (error) {
        if (!(error instanceof OutOfMemoryError)) throw error;
        oomAtEvent ??= i;
      }
    }
  }
  return {
    allocConf: formatAllocatorConf(config),
    peakReservedBytes: allocator.stats.reserved_bytes[0].peak,
    peakAllocatedBytes: allocator.stats.allocated_bytes[0].peak,
    oomAtEvent,
    numAllocRetries: allocator.stats.num_alloc_retries,
    segments: options.segmentsAtEvent === undefined ? null : allocator.segments(),
  };
}
