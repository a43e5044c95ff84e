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
 */
import { CachingAllocator, OutOfMemoryError, type TraceEvent } from '../allocator/caching-allocator.ts';
import type { Block } from '../allocator/block.ts';
import { parseAllocatorConf, formatAllocatorConf } from '../allocator/config.ts';
import type { DeviceMemory } from '../allocator/device-memory.ts';
import { SimulatedDevice } from '../allocator/device-memory.ts';
import type { MemorySnapshot, SnapshotTraceEvent } from './snapshot.ts';
import { allocatorConfFromSettings } from './snapshot.ts';
import { DEFAULT_TIMELINE_POINTS, TimelineRecorder, decimateTimeline, type Timeline } from '../result/timeline.ts';

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
  memoryStats: Record<string, number>;
  /** Allocated and reserved (simulated and real) after each event, min/max-decimated (engine/result/timeline.ts). */
  timeline: Timeline;
}

const kDefaultTotalGlobalMem = 85_899_345_920; // 80 GiB

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

/** Replays the snapshot's trace and compares it event by event with what the simulator does. */
export function replaySnapshot(snapshot: MemorySnapshot, options: ReplayOptions = {}): ReplayReport {
  const allocConf = options.allocConf ?? allocatorConfFromSettings(snapshot.allocatorSettings);
  const config = parseAllocatorConf(allocConf, options.allocConf === undefined ? 'snapshot allocator_settings' : 'alloc conf');
  const device = new TraceAddressDevice(snapshot.trace);
  const simEvents: TraceEvent[] = [];
  const allocator = new CachingAllocator({
    config,
    device,
    totalGlobalMemBytes: options.totalGlobalMemBytes ?? kDefaultTotalGlobalMem,
    memoryLimitBytes: options.memoryLimitBytes,
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
  let realSegmentEvents = 0;
  let mismatches = 0;
  let reservedMismatchEvents = 0;
  let firstMismatch: SegmentEventMismatch | null = null;
  let realOom = false;
  let simOom = false;
  const emptyCacheCalls: number[] = [];
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
        if (realAllocated > realPeakAllocated) realPeakAllocated = realAllocated;
        if (realRequested > realPeakRequested) realPeakRequested = realRequested;
        break;
      }
      case 'free_requested': {
        settle(i);
        const block = blocks.get(e.addr);
        if (!block) break; // allocated before recording started
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
        if (options.memoryLimitBytes === undefined) device.capacityBytes = allocator.reservedBytes + e.deviceFree;
        try {
          const block = allocator.malloc(e.size, e.stream);
          allocator.free(block); // the real program got an OOM here: nothing stays allocated
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
    memoryLimitBytes: options.memoryLimitBytes ?? null,
    realPeakReservedBytes: realPeakReserved,
    realPeakAllocatedBytes: realPeakAllocated,
    realPeakRequestedBytes: realPeakRequested,
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
}

/**
 * Replays the trace's allocations and frees (and its empty_cache() calls, found by replaySnapshot) under other
 * allocator settings: what the same program would have reserved with, e.g., expandable_segments:True.
 */
export function replayWhatIf(
  snapshot: MemorySnapshot,
  emptyCacheCalls: readonly number[],
  allocConf: string,
  options: { memoryLimitBytes?: number | undefined; totalGlobalMemBytes?: number | undefined } = {},
): WhatIfResult {
  const config = parseAllocatorConf(allocConf, 'alloc conf');
  const allocator = new CachingAllocator({
    config,
    device: new TraceAddressDevice(snapshot.trace),
    totalGlobalMemBytes: options.totalGlobalMemBytes ?? kDefaultTotalGlobalMem,
    memoryLimitBytes: options.memoryLimitBytes,
  });
  const emptyCacheAt = new Set(emptyCacheCalls);
  const blocks = new Map<number, Block>();
  let oomAtEvent: number | null = null;
  const trace = snapshot.trace;
  for (let i = 0; i < trace.length && oomAtEvent === null; i++) {
    const e = trace[i]!;
    if (emptyCacheAt.has(i)) allocator.emptyCache();
    if (e.action === 'alloc') {
      try {
        blocks.set(e.addr, allocator.malloc(e.size, e.stream));
      } catch (error) {
        if (!(error instanceof OutOfMemoryError)) throw error;
        oomAtEvent = i;
      }
    } else if (e.action === 'free_requested') {
      const block = blocks.get(e.addr);
      if (block) allocator.requestFree(block);
    } else if (e.action === 'free_completed') {
      const block = blocks.get(e.addr);
      if (block) {
        allocator.completeFree(block);
        blocks.delete(e.addr);
      }
    }
  }
  return {
    allocConf: formatAllocatorConf(config),
    peakReservedBytes: allocator.stats.reserved_bytes[0].peak,
    peakAllocatedBytes: allocator.stats.allocated_bytes[0].peak,
    oomAtEvent,
    numAllocRetries: allocator.stats.num_alloc_retries,
  };
}
