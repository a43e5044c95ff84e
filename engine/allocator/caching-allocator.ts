/**
 * PyTorch's CUDA caching allocator for one device, block for block: `DeviceCachingAllocator` of
 * `c10/cuda/CUDACachingAllocator.cpp` (PyTorch 2.11). Each method names the PyTorch function it mirrors.
 *
 * Design, as in PyTorch:
 * - Requests round up (round_size) and go to the small pool (<= 1 MiB) or the large pool.
 * - A request takes the smallest cached free block that fits on its stream (best fit, lowest address among
 *   equals), splitting it when the remainder is worth keeping (should_split).
 * - With no fitting block, a new segment is cudaMalloc'd: 2 MiB for small requests, large_segment_size (20 MiB
 *   unless set) for 1-10 MiB ones, the request rounded up to 2 MiB above that (get_allocation_size).
 * - Freed blocks merge with free neighbours of their segment and stay cached; only empty_cache() and the
 *   out-of-memory path give whole free segments back (release_cached_blocks).
 * - A memory fraction caps reserved bytes (set_per_process_memory_fraction); hitting the cap, or the device
 *   running out, releases cached segments and retries once before raising the OOM.
 *
 * Single-device; streams are numbers. Cross-stream uses (record_stream) are driven from outside through
 * requestFree/completeFree, as the replay of a trace does.
 */
import type { AllocatorConfig } from './config.ts';
import { roundupPower2Divisions } from './config.ts';
import { kMaxRequestBytes, kMinBlockSize, kMinLargeAlloc, kRoundLarge, kSmallBuffer, kSmallSize } from './constants.ts';
import { Block, BlockPool } from './block.ts';
import type { DeviceMemory } from './device-memory.ts';
import { ExpandableSegment } from './expandable-segment.ts';
import { AGGREGATE, DeviceStats, LARGE_POOL, SMALL_POOL, decreaseStats, increaseStats, memoryStatsDict, type PoolStatType } from './stats.ts';
import { formatSize } from './format.ts';

/** The trace entries PyTorch records (`TraceEntry::Action`), as a memory snapshot names them. */
export type TraceAction =
  | 'alloc'
  | 'free_requested'
  | 'free_completed'
  | 'segment_alloc'
  | 'segment_free'
  | 'segment_map'
  | 'segment_unmap'
  | 'oom';

export interface TraceEvent {
  action: TraceAction;
  /** Address; for `oom`, the device's free bytes (as PyTorch records it). */
  addr: number;
  /** Bytes: requested size for alloc/free, segment or mapped size for segment events, rounded size for oom. */
  size: number;
  stream: number;
}

/** A trace entry as arguments; `label` says what an allocation holds (memplan's own addition, for timelines). */
export type TraceListener = (action: TraceAction, addr: number, size: number, stream: number, label?: string) => void;

export interface CachingAllocatorOptions {
  config: AllocatorConfig;
  device: DeviceMemory;
  /** `totalGlobalMem` of the device (sizes the address range of expandable segments; the OOM message). */
  totalGlobalMemBytes: number;
  /** The cap `set_per_process_memory_fraction` imposes on reserved bytes (`allowed_memory_maximum`). */
  memoryLimitBytes?: number | undefined;
  /** Memory the process holds outside the allocator (CUDA context), for the OOM message; unknown if omitted. */
  nonPyTorchBytes?: number | undefined;
  /** Called for every trace entry, in PyTorch's order (arguments, not an object: this is the hot path). */
  onTrace?: TraceListener | undefined;
}

/** `torch.OutOfMemoryError` (`torch.cuda.OutOfMemoryError`), with PyTorch's message. */
/** One block of a segment, as `torch.cuda.memory_snapshot()` lists it (`BlockInfo`). */
export interface SegmentBlockInfo {
  address: number;
  size: number;
  /** What the caller asked for (0 unless allocated). */
  requested_size: number;
  /** `active_allocated`: handed out; `active_pending_free`: freed, waiting on a stream's event; `inactive`: cached free. */
  state: 'active_allocated' | 'active_pending_free' | 'inactive';
}

/** One segment (`SegmentInfo`): a cudaMalloc, or the mapped part of an expandable segment. */
export interface SegmentInfo {
  address: number;
  total_size: number;
  allocated_size: number;
  stream: number;
  segment_type: 'small' | 'large';
  is_expandable: boolean;
  blocks: SegmentBlockInfo[];
}

export class OutOfMemoryError extends Error {
  /** The request that failed, before rounding. */
  readonly requestedBytes: number;
  /** The segment size PyTorch tried to allocate (what its message prints). */
  readonly allocSizeBytes: number;

  constructor(message: string, requestedBytes: number, allocSizeBytes: number) {
    super(message);
    this.name = 'OutOfMemoryError';
    this.requestedBytes = requestedBytes;
    this.allocSizeBytes = allocSizeBytes;
  }
}

interface AllocParams {
  stream: number;
  /** Rounded size. */
  size: number;
  pool: BlockPool;
  /** Segment size a new cudaMalloc would take. */
  allocSize: number;
  block: Block | null;
}

export class CachingAllocator {
  readonly stats: DeviceStats;
  readonly config: AllocatorConfig;
  private readonly device: DeviceMemory;
  private readonly largeBlocks = new BlockPool(false);
  private readonly smallBlocks = new BlockPool(true);
  /**
   * `active_blocks`: blocks handed out, or freed but not yet completed. A list through the blocks themselves
   * (`Block.active`, `activePrev`/`activeNext`), first added first: every request adds and removes one, and a
   * Set's hashing cost about a tenth of a replayed run (GPT-2 XL: 25.5 -> 23.2 ms).
   */
  private activeFirst: Block | null = null;
  private activeLast: Block | null = null;
  private readonly expandableSegments: ExpandableSegment[] = [];
  /**
   * Blocks absorbed by a merge, reused for the next split: a split makes a Block and a free merges one away on
   * every other request. The Llama 2 70B search on 2 TiB (`npm run bench`'s, bench/cli.ts) uses 845,000 blocks:
   * 105,000 Block objects are made, the rest reused.
   */
  private readonly spareBlocks: Block[] = [];
  /** `total_allocated_memory`: bytes reserved from the device (segments and mapped pages). */
  private totalAllocatedMemory = 0;
  private readonly allowedMemoryMaximum: number | undefined;
  private readonly totalGlobalMemBytes: number;
  private readonly nonPyTorchBytes: number | undefined;
  private readonly onTrace: TraceListener | undefined;

  constructor(options: CachingAllocatorOptions) {
    this.config = options.config;
    this.device = options.device;
    this.totalGlobalMemBytes = options.totalGlobalMemBytes;
    this.allowedMemoryMaximum = options.memoryLimitBytes;
    this.nonPyTorchBytes = options.nonPyTorchBytes;
    this.onTrace = options.onTrace;
    this.stats = new DeviceStats(this.config.maxSplitSizeBytes);
    this.roundsByDivisions = this.config.roundupPower2Divisions.some((d) => d > 1);
  }

  /** Whether `roundup_power2_divisions` rounds any size (round_size asks for every request otherwise). */
  private readonly roundsByDivisions: boolean;
  /** malloc's AllocParams. */
  private readonly params: AllocParams = { stream: 0, size: 0, pool: this.largeBlocks, allocSize: 0, block: null };

  private trace(action: TraceAction, addr: number, size: number, stream: number, label?: string): void {
    if (this.onTrace) this.onTrace(action, addr, size, stream, label);
  }

  private get gcEnabled(): boolean {
    return this.allowedMemoryMaximum !== undefined && this.config.garbageCollectionThreshold > 0;
  }

  /** Reserved bytes now (`memory_reserved()`). */
  get reservedBytes(): number {
    return this.stats.reserved_bytes[AGGREGATE].current;
  }

  /** Allocated bytes now (`memory_allocated()`). */
  get allocatedBytes(): number {
    return this.stats.allocated_bytes[AGGREGATE].current;
  }

  /** `torch.cuda.memory_stats()`. */
  memoryStats(): Record<string, number> {
    return memoryStatsDict(this.stats);
  }

  /**
   * The segments and their blocks now, in address order: `DeviceCachingAllocator::snapshot` (what
   * `torch.cuda.memory_snapshot()` lists), without the stack frames. Unmapped pages of expandable segments are left
   * out, as PyTorch lists only mapped ranges.
   */
  segments(): SegmentInfo[] {
    const out: SegmentInfo[] = [];
    for (const head of this.segmentHeads()) {
      const blocks: SegmentBlockInfo[] = [];
      let total = 0;
      let allocated = 0;
      for (let b: Block | null = head; b; b = b.next) {
        if (!b.mapped) continue;
        const state = b.allocated ? 'active_allocated' : b.active ? 'active_pending_free' : 'inactive';
        blocks.push({ address: b.ptr, size: b.size, requested_size: b.allocated ? b.requestedSize : 0, state });
        total += b.size;
        if (b.allocated) allocated += b.size;
      }
      if (blocks.length === 0) continue;
      out.push({ address: blocks[0]!.address, total_size: total, allocated_size: allocated, stream: head.stream, segment_type: head.pool.isSmall ? 'small' : 'large', is_expandable: head.expandableSegment !== null, blocks });
    }
    return out.sort((a, b) => a.address - b.address);
  }

  /**
   * The first block of every segment (mapped or not), each once: a segment's first block is handed out, cached
   * free or an unmapped range of an expandable segment.
   */
  segmentHeads(): Block[] {
    const heads: Block[] = [];
    for (let b = this.activeFirst; b; b = b.activeNext) if (b.prev === null) heads.push(b);
    for (const pool of [this.largeBlocks, this.smallBlocks]) {
      for (const b of pool.blocks.toArray()) if (b.prev === null) heads.push(b);
      for (const b of pool.unmapped.toArray()) if (b.prev === null) heads.push(b);
    }
    return heads;
  }

  /** Whether a free block is still waiting for its streams (`active_pending_free`) rather than cached. */
  isPendingFree(block: Block): boolean {
    return !block.allocated && block.active;
  }

  // ---------------------------------------------------------------------------------------------- sizes

  /** `round_size`. */
  roundSize(size: number): number {
    if (size < kMinBlockSize) return kMinBlockSize;
    const divisions = this.roundsByDivisions ? roundupPower2Divisions(this.config, size) : 0;
    if (divisions > 1 && size > kMinBlockSize * divisions) return roundupPower2NextDivision(size, divisions);
    return kMinBlockSize * Math.ceil(size / kMinBlockSize);
  }

  /** `get_allocation_size`: the segment a new cudaMalloc takes for a rounded request. */
  getAllocationSize(size: number): number {
    if (size <= kSmallSize) return kSmallBuffer;
    if (size < kMinLargeAlloc) return this.config.largeSegmentSizeBytes;
    return kRoundLarge * Math.ceil(size / kRoundLarge);
  }

  private getPool(size: number): BlockPool {
    return size <= kSmallSize ? this.smallBlocks : this.largeBlocks;
  }

  private poolStat(pool: BlockPool): PoolStatType {
    return pool.isSmall ? SMALL_POOL : LARGE_POOL;
  }

  // ---------------------------------------------------------------------------------------------- malloc

  /**
   * `DeviceCachingAllocator::malloc`. Returns the block; throws OutOfMemoryError as PyTorch does.
   * `label` names what the memory holds, for the timeline and the peak breakdown.
   */
  malloc(origSize: number, stream = 0, label?: string): Block {
    if (origSize >= kMaxRequestBytes) {
      throw new OutOfMemoryError('CUDA out of memory. Tried to allocate more than 1EB memory.', origSize, origSize);
    }
    const size = this.roundSize(origSize);
    const pool = this.getPool(size);
    // One AllocParams for every call (malloc does not nest): not a new object per request on the hottest path.
    const params = this.params;
    params.stream = stream;
    params.size = size;
    params.pool = pool;
    params.allocSize = this.getAllocationSize(size);
    params.block = null;

    let found = this.getFreeBlock(params);
    if (!found) {
      if (this.gcEnabled) this.garbageCollectCachedBlocks();
      found =
        this.allocBlock(params, false) ||
        (this.releaseAvailableCachedBlocks(params) && this.allocBlock(params, false)) ||
        (this.releaseCachedBlocks() && this.allocBlock(params, true));
    }
    if (!found) this.raiseOutOfMemory(params, origSize);

    const splitRemainder = this.shouldSplit(params.block!, size);
    return this.allocFoundBlock(params, origSize, splitRemainder, label);
  }

  /**
   * Would malloc(size) release cached memory (garbage collection, release-and-retry) or fail? Asks without
   * changing anything. The replay uses it to tell an allocation's releases from an empty_cache() call.
   */
  wouldReleaseCachedMemory(origSize: number, stream = 0): boolean {
    const size = this.roundSize(origSize);
    const pool = this.getPool(size);
    if (this.findFreeBlockIndex(pool, stream, size) >= 0) return false;
    if (this.gcEnabled && this.totalAllocatedMemory > Math.floor(this.config.garbageCollectionThreshold * this.allowedMemoryMaximum!)) return true;
    const allocSize = this.getAllocationSize(size);
    if (this.allowedMemoryMaximum !== undefined && this.totalAllocatedMemory + allocSize > this.allowedMemoryMaximum) return true;
    if (this.config.expandableSegments) return false; // pages are mapped one by one; the device's room is not predicted here
    return allocSize > this.device.freeBytes;
  }

  private raiseOutOfMemory(params: AllocParams, origSize: number): never {
    const deviceFree = this.device.freeBytes;
    this.trace('oom', deviceFree, params.size, params.stream);
    this.stats.num_ooms += 1;
    const allocated = this.stats.allocated_bytes[AGGREGATE].current;
    const reserved = this.stats.reserved_bytes[AGGREGATE].current;
    const procInfo =
      this.nonPyTorchBytes === undefined
        ? ''
        : `Including non-PyTorch memory, this process has ${formatSize(reserved + this.nonPyTorchBytes)} memory in use. `;
    const allowedInfo = this.allowedMemoryMaximum === undefined ? '' : `${formatSize(this.allowedMemoryMaximum)} allowed; `;
    const message =
      `CUDA out of memory. Tried to allocate ${formatSize(params.allocSize)}. GPU 0 has a total capacity of ` +
      `${formatSize(this.totalGlobalMemBytes)} of which ${formatSize(Math.max(0, deviceFree))} is free. ` +
      procInfo +
      allowedInfo +
      `Of the allocated memory ${formatSize(allocated)} is allocated by PyTorch, and ` +
      `${formatSize(reserved - allocated)} is reserved by PyTorch but unallocated.` +
      ' If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid' +
      ' fragmentation.  See documentation for Memory Management ' +
      ' (https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)';
    throw new OutOfMemoryError(message, origSize, params.allocSize);
  }

  /**
   * Position in pool.blocks of the block get_free_block would take, or -1. Shared by getFreeBlock and
   * wouldNeedRelease.
   */
  private findFreeBlockIndex(pool: BlockPool, stream: number, size: number): number {
    const blocks = pool.blocks;
    const end = blocks.end();
    let i = blocks.lowerBound(stream, size, 0);
    if (i === end || blocks.at(i).stream !== stream) return -1;
    if (blocks.at(i).expandableSegment) {
      if (this.config.expandableSegments) {
        // Best fit by the size a block can grow to: its own plus the unmapped range after it.
        const expandableSize = (b: Block) => b.size + (b.next && !b.next.mapped ? b.next.size : 0);
        for (;;) {
          const block = blocks.at(i);
          const next = blocks.next(i);
          if (!block.expandableSegment || next === end || blocks.at(next).stream !== stream || expandableSize(blocks.at(next)) >= expandableSize(block)) break;
          i = next;
        }
      } else {
        do i = blocks.next(i);
        while (i !== end && blocks.at(i).expandableSegment && blocks.at(i).stream === stream);
        if (i === end || blocks.at(i).stream !== stream) return -1;
      }
    }
    const candidate = blocks.at(i);
    const maxSplit = this.config.maxSplitSizeBytes;
    // Do not return an oversized block for a small request.
    if (size < maxSplit && candidate.size >= maxSplit) return -1;
    // An oversized block may serve a large request only within max_non_split_rounding_size.
    if (size >= maxSplit && candidate.size >= size + this.config.maxNonSplitRoundingBytes) return -1;
    return i;
  }

  /** `get_free_block`. */
  private getFreeBlock(p: AllocParams): boolean {
    if (this.gcEnabled) p.pool.getFreeBlocksCallCount++;
    const i = this.findFreeBlockIndex(p.pool, p.stream, p.size);
    if (i < 0) return false;
    p.block = p.pool.blocks.at(i);
    p.pool.blocks.removeAt(i);
    return true;
  }

  /** `should_split`. */
  private shouldSplit(block: Block, size: number): boolean {
    const remaining = block.size - size;
    if (block.pool.isSmall || this.config.expandableSegments) return remaining >= kMinBlockSize;
    return size < this.config.maxSplitSizeBytes && remaining > kSmallSize;
  }

  /** `alloc_found_block`. */
  private allocFoundBlock(params: AllocParams, origSize: number, splitRemainder: boolean, label: string | undefined): Block {
    const { size, pool, stream } = params;
    let block = params.block!;
    const s = this.stats;
    const poolStat = this.poolStat(pool);
    const alreadySplit = block.isSplit();
    if (splitRemainder) {
      const remaining = block;
      block = this.spareBlocks.pop()?.reuse(stream, size, pool, remaining.ptr) ?? new Block(stream, size, pool, remaining.ptr);
      block.expandableSegment = remaining.expandableSegment;
      block.prev = remaining.prev;
      if (block.prev) block.prev.next = block;
      block.next = remaining;
      remaining.prev = block;
      remaining.ptr += size;
      remaining.size -= size;
      pool.insertIntoBlocks(remaining);
      if (alreadySplit && !block.expandableSegment) {
        // An already-split inactive block is being shrunk by size bytes.
        decreaseStats(s.inactive_split_bytes, poolStat, block.size);
      } else if (!block.expandableSegment) {
        // A new split inactive block is being created from a previously unsplit block.
        increaseStats(s.inactive_split_bytes, poolStat, remaining.size);
        increaseStats(s.inactive_split, poolStat, 1);
      }
    } else if (alreadySplit && !block.expandableSegment) {
      // An already-split block is becoming active.
      decreaseStats(s.inactive_split_bytes, poolStat, block.size);
      decreaseStats(s.inactive_split, poolStat, 1);
    }
    block.allocated = true;
    block.requestedSize = origSize;
    block.label = label;
    this.trace('alloc', block.ptr, origSize, block.stream, label);
    this.addActive(block);
    increaseStats(s.allocation, poolStat, 1);
    increaseStats(s.allocated_bytes, poolStat, block.size);
    increaseStats(s.active, poolStat, 1);
    increaseStats(s.active_bytes, poolStat, block.size);
    increaseStats(s.requested_bytes, poolStat, origSize);
    if (block.size >= this.config.maxSplitSizeBytes) s.oversize_allocations.increase(1);
    return block;
  }

  /** `active_blocks.insert(block)`. */
  private addActive(block: Block): void {
    block.active = true;
    block.activePrev = this.activeLast;
    block.activeNext = null;
    if (this.activeLast) this.activeLast.activeNext = block;
    else this.activeFirst = block;
    this.activeLast = block;
  }

  /** `active_blocks.erase(block)`. */
  private removeActive(block: Block): void {
    block.active = false;
    if (block.activePrev) block.activePrev.activeNext = block.activeNext;
    else this.activeFirst = block.activeNext;
    if (block.activeNext) block.activeNext.activePrev = block.activePrev;
    else this.activeLast = block.activePrev;
    block.activePrev = null;
    block.activeNext = null;
  }

  // ---------------------------------------------------------------------------------------------- free

  /** `free` of a block used on its own stream only: the usual case. */
  free(block: Block): void {
    this.requestFree(block);
    this.completeFree(block);
  }

  /**
   * The first half of `free`: the block stops counting as allocated. Without cross-stream uses PyTorch calls
   * completeFree (free_block) at once; with them, once their events complete.
   */
  requestFree(block: Block): void {
    if (!block.allocated) throw new Error(`free of a block that is not allocated (ptr ${block.ptr})`);
    block.allocated = false;
    const poolStat = this.poolStat(block.pool);
    decreaseStats(this.stats.allocation, poolStat, 1);
    decreaseStats(this.stats.allocated_bytes, poolStat, block.size);
    this.trace('free_requested', block.ptr, block.requestedSize, block.stream);
    if (block.size >= this.config.maxSplitSizeBytes) this.stats.oversize_allocations.decrease(1);
  }

  /** `free_block`: the block returns to its pool, merging with free neighbours. */
  completeFree(block: Block): void {
    if (block.allocated || !block.active) throw new Error(`free_block of a block that is not freed (ptr ${block.ptr})`);
    this.trace('free_completed', block.ptr, block.requestedSize, block.stream, block.label);
    const originalBlockSize = block.size;
    const requestedSize = block.requestedSize;
    const pool = block.pool;
    let netInactiveSplitBlocks = 0;
    let netInactiveSplitSize = 0;
    const mergedPrev = this.tryMergeBlocks(block, block.prev, pool);
    if (mergedPrev > 0) {
      netInactiveSplitBlocks -= 1;
      netInactiveSplitSize -= mergedPrev;
    }
    const mergedNext = this.tryMergeBlocks(block, block.next, pool);
    if (mergedNext > 0) {
      netInactiveSplitBlocks -= 1;
      netInactiveSplitSize -= mergedNext;
    }
    this.removeActive(block);
    block.label = undefined;
    pool.insertIntoBlocks(block);
    if (block.isSplit()) {
      netInactiveSplitBlocks += 1;
      netInactiveSplitSize += block.size;
    }
    const s = this.stats;
    const poolStat = this.poolStat(pool);
    // inactive_split leaves out expandable segments, whose free pages can always be given back.
    if (!block.expandableSegment) {
      if (netInactiveSplitBlocks > 0) increaseStats(s.inactive_split, poolStat, netInactiveSplitBlocks);
      else if (netInactiveSplitBlocks < 0) decreaseStats(s.inactive_split, poolStat, -netInactiveSplitBlocks);
      if (netInactiveSplitSize > 0) increaseStats(s.inactive_split_bytes, poolStat, netInactiveSplitSize);
      else if (netInactiveSplitSize < 0) decreaseStats(s.inactive_split_bytes, poolStat, -netInactiveSplitSize);
    }
    decreaseStats(s.active, poolStat, 1);
    decreaseStats(s.active_bytes, poolStat, originalBlockSize);
    decreaseStats(s.requested_bytes, poolStat, requestedSize);
  }

  /** `try_merge_blocks`: dst absorbs a free neighbour src; returns the bytes absorbed, or 0. */
  private tryMergeBlocks(dst: Block, src: Block | null, pool: BlockPool): number {
    if (!src || src.allocated || src.active || dst.mapped !== src.mapped) return 0;
    // src is free and cached: take it out of its set before dst's range changes.
    if (src.mapped) pool.blocks.erase(src);
    else pool.unmapped.erase(src);
    if (dst.prev === src) {
      dst.ptr = src.ptr;
      dst.prev = src.prev;
      if (dst.prev) dst.prev.next = dst;
    } else {
      dst.next = src.next;
      if (dst.next) dst.next.prev = dst;
    }
    dst.size += src.size;
    const absorbed = src.size;
    // Nothing refers to src any more (a block handed out is never merged; its storage let go of it when freed).
    if (src.expandableSegment === null) {
      src.prev = src.next = null; // its old neighbours may go
      this.spareBlocks.push(src);
    }
    return absorbed;
  }

  // ---------------------------------------------------------------------------------------------- segments

  /** `alloc_block`: a new segment (or mapped pages) for the request. */
  private allocBlock(p: AllocParams, isRetry: boolean): boolean {
    const size = p.allocSize;
    if (isRetry) this.stats.num_alloc_retries += 1;
    if (this.allowedMemoryMaximum !== undefined && this.totalAllocatedMemory + size > this.allowedMemoryMaximum) return false;
    if (this.config.expandableSegments) {
      p.block = this.tryAllocateExpandableBlock(p.stream, p.pool, p.size);
      return p.block !== null;
    }
    const ptr = this.device.malloc(size);
    if (ptr === null) return false;
    this.totalAllocatedMemory += size;
    p.block = new Block(p.stream, size, p.pool, ptr);
    increaseStats(this.stats.segment, this.poolStat(p.pool), 1);
    increaseStats(this.stats.reserved_bytes, this.poolStat(p.pool), size);
    if (size >= this.config.maxSplitSizeBytes) this.stats.oversize_segments.increase(1);
    this.stats.num_device_alloc++;
    this.trace('segment_alloc', ptr, size, p.stream);
    return true;
  }

  /** `release_block`: cudaFree a whole free segment. */
  private releaseBlock(block: Block): void {
    this.stats.num_device_free++;
    this.trace('segment_free', block.ptr, block.size, block.stream);
    this.device.free(block.ptr, block.size);
    this.totalAllocatedMemory -= block.size;
    decreaseStats(this.stats.segment, this.poolStat(block.pool), 1);
    decreaseStats(this.stats.reserved_bytes, this.poolStat(block.pool), block.size);
    if (block.size >= this.config.maxSplitSizeBytes) this.stats.oversize_segments.decrease(1);
    block.pool.blocks.erase(block);
  }

  /** `release_available_cached_blocks`: free oversize cached blocks, enough for the request. */
  private releaseAvailableCachedBlocks(p: AllocParams): boolean {
    const maxSplit = this.config.maxSplitSizeBytes;
    if (!Number.isFinite(maxSplit)) return false;
    const blocks = p.pool.blocks;
    const keySize = p.size < maxSplit ? maxSplit : p.size;
    let i = blocks.lowerBound(p.stream, keySize, 0);
    // Blocks of expandable segments are never cudaFree'd here: their pages are unmapped by release_blocks only.
    if (i === blocks.end() || blocks.at(i).stream !== p.stream || blocks.at(i).expandableSegment) {
      // No single block is large enough: free oversize blocks from the largest down (releasing one keeps the
      // positions before it).
      i = blocks.prev(i);
      if (i < 0) return false;
      let totalReleased = 0;
      while (i >= 0 && totalReleased < keySize && blocks.at(i).size >= maxSplit && blocks.at(i).stream === p.stream) {
        const current = blocks.at(i);
        i = blocks.prev(i);
        if (!current.expandableSegment) {
          totalReleased += current.size;
          this.releaseBlock(current);
        }
      }
      if (totalReleased < keySize) return false;
    } else {
      this.releaseBlock(blocks.at(i));
    }
    return true;
  }

  /** `release_cached_blocks` (`empty_cache()`, and the last resort before an OOM). */
  private releaseCachedBlocks(): boolean {
    this.stats.num_sync_all_streams++;
    this.releaseBlocks(this.largeBlocks);
    this.releaseBlocks(this.smallBlocks);
    return true;
  }

  /** `release_blocks`: free every whole free segment; unmap free pages of expandable segments. */
  private releaseBlocks(pool: BlockPool): void {
    const toUnmap: Block[] = [];
    for (const block of pool.blocks.toArray()) {
      if (block.expandableSegment) toUnmap.push(block);
      else if (!block.prev && !block.next) this.releaseBlock(block);
    }
    for (const block of toUnmap) {
      this.unmapBlock(block);
      if (!block.prev && !block.next) this.releaseExpandableSegment(block);
    }
  }

  /** `garbage_collect_cached_blocks`: under a memory fraction, free old unsplit large blocks. */
  private garbageCollectCachedBlocks(): void {
    const gcThreshold = Math.floor(this.config.garbageCollectionThreshold * this.allowedMemoryMaximum!);
    if (this.totalAllocatedMemory <= gcThreshold) return;
    const targetSize = this.totalAllocatedMemory - gcThreshold;
    let gcReclaimed = 0;
    const pool = this.largeBlocks;
    const gcCount = (b: Block) => pool.getFreeBlocksCallCount - b.gcCountBase;
    let totalAge = 0;
    let freeableBlockCount = 0;
    for (const b of pool.blocks.toArray()) {
      if (!b.isSplit()) {
        totalAge += gcCount(b);
        ++freeableBlockCount;
      }
    }
    if (freeableBlockCount === 0) return;
    let blockFreed = true;
    while (gcReclaimed < targetSize && blockFreed && freeableBlockCount > 0) {
      const ageThreshold = totalAge / freeableBlockCount;
      blockFreed = false;
      for (const block of pool.blocks.toArray()) {
        if (!block.isSplit() && gcCount(block) >= ageThreshold) {
          blockFreed = true;
          gcReclaimed += block.size;
          totalAge -= gcCount(block);
          freeableBlockCount--;
          this.releaseBlock(block);
        }
      }
    }
  }

  /** `torch.cuda.empty_cache()` (`emptyCache` -> `release_cached_blocks`). */
  emptyCache(): void {
    this.releaseCachedBlocks();
  }

  // ---------------------------------------------------------------------------------------------- expandable segments

  /** `find_expandable_block`: the lowest address with room for size in free and unmapped blocks. */
  private findExpandableBlock(stream: number, pool: BlockPool, size: number): Block {
    const allocatable = (b: Block | null): b is Block => b !== null && !b.allocated && !b.active;
    const hasAvailableAddressSpace = (start: Block) => {
      let bytes = 0;
      let b: Block | null = start;
      while (bytes < size && allocatable(b)) {
        bytes += b.size;
        b = b.next;
      }
      return bytes >= size;
    };
    const unmapped = pool.unmapped;
    for (let i = unmapped.lowerBound(stream, 0, 0); i !== unmapped.end() && unmapped.at(i).stream === stream; i = unmapped.next(i)) {
      let c = unmapped.at(i);
      if (allocatable(c.prev)) c = c.prev;
      if (hasAvailableAddressSpace(c)) return c;
    }
    const pageSize = pool.isSmall ? kSmallBuffer : this.config.largeSegmentSizeBytes;
    const segment = new ExpandableSegment(this.device, this.totalGlobalMemBytes, pageSize);
    this.expandableSegments.push(segment);
    const candidate = new Block(stream, segment.size, pool, segment.ptr);
    candidate.mapped = false;
    candidate.expandableSegment = segment;
    pool.unmapped.insert(candidate);
    return candidate;
  }

  /** `map_block`: back the first size bytes of an unmapped block with pages. */
  private mapBlock(toMap: Block, size: number): boolean {
    const mappedRange = toMap.expandableSegment!.map({ ptr: toMap.ptr, size });
    if (mappedRange.size === 0) return false;
    const pool = toMap.pool;
    pool.unmapped.erase(toMap);
    toMap.mapped = true;
    if (mappedRange.size < toMap.size) {
      const remaining = new Block(toMap.stream, toMap.size - mappedRange.size, pool, toMap.ptr + mappedRange.size);
      remaining.mapped = false;
      remaining.expandableSegment = toMap.expandableSegment;
      remaining.prev = toMap;
      remaining.next = toMap.next;
      if (toMap.next) toMap.next.prev = remaining;
      toMap.next = remaining;
      pool.unmapped.insert(remaining);
      toMap.size = mappedRange.size;
    }
    this.tryMergeBlocks(toMap, toMap.prev, pool);
    this.tryMergeBlocks(toMap, toMap.next, pool);
    pool.insertIntoBlocks(toMap);
    this.totalAllocatedMemory += mappedRange.size;
    increaseStats(this.stats.reserved_bytes, this.poolStat(pool), mappedRange.size);
    this.stats.num_device_alloc++;
    this.trace('segment_map', mappedRange.ptr, mappedRange.size, toMap.stream);
    return true;
  }

  /** `try_allocate_expandable_block`. */
  private tryAllocateExpandableBlock(stream: number, pool: BlockPool, size: number): Block | null {
    let candidate = this.findExpandableBlock(stream, pool, size);
    if (!candidate.mapped && !this.mapBlock(candidate, Math.min(candidate.size, size))) return null;
    while (candidate.size < size) {
      const remaining = size - candidate.size;
      const newCandidate = candidate.next!;
      if (!this.mapBlock(newCandidate, Math.min(remaining, newCandidate.size))) return null;
      candidate = newCandidate;
    }
    pool.blocks.erase(candidate);
    return candidate;
  }

  /** `unmap_block`: give back the whole pages inside a free expandable block. */
  private unmapBlock(block: Block): void {
    const unmapped = block.expandableSegment!.unmap({ ptr: block.ptr, size: block.size });
    if (unmapped.size === 0) return;
    const pool = block.pool;
    pool.blocks.erase(block);
    const beforeSize = unmapped.ptr - block.ptr;
    if (beforeSize > 0) {
      const beforeFree = new Block(block.stream, beforeSize, pool, block.ptr);
      beforeFree.expandableSegment = block.expandableSegment;
      beforeFree.prev = block.prev;
      if (block.prev) block.prev.next = beforeFree;
      beforeFree.next = block;
      block.prev = beforeFree;
      pool.insertIntoBlocks(beforeFree);
    }
    const afterSize = block.size - (beforeSize + unmapped.size);
    if (afterSize > 0) {
      const afterFree = new Block(block.stream, afterSize, pool, unmapped.ptr + unmapped.size);
      afterFree.expandableSegment = block.expandableSegment;
      afterFree.next = block.next;
      if (block.next) block.next.prev = afterFree;
      afterFree.prev = block;
      block.next = afterFree;
      pool.insertIntoBlocks(afterFree);
    }
    block.ptr = unmapped.ptr;
    block.size = unmapped.size;
    block.mapped = false;
    this.tryMergeBlocks(block, block.prev, pool);
    this.tryMergeBlocks(block, block.next, pool);
    pool.unmapped.insert(block);
    this.totalAllocatedMemory -= unmapped.size;
    decreaseStats(this.stats.reserved_bytes, this.poolStat(pool), unmapped.size);
    this.stats.num_device_free++;
    this.trace('segment_unmap', unmapped.ptr, unmapped.size, block.stream);
  }

  /** `release_expandable_segment`: a wholly unmapped segment gives back its address range. */
  private releaseExpandableSegment(block: Block): void {
    const segment = block.expandableSegment!;
    const i = this.expandableSegments.indexOf(segment);
    if (i >= 0) this.expandableSegments.splice(i, 1);
    block.pool.unmapped.erase(block);
  }
}

/** `roundup_power2_next_division`. */
export function roundupPower2NextDivision(size: number, divisions: number): number {
  const power2Floor = 2 ** Math.floor(Math.log2(size));
  if (power2Floor === size) return size;
  const power2Division = Math.floor(power2Floor / 2 ** Math.floor(Math.log2(divisions)));
  if (power2Division === 0) return power2Floor * 2;
  const roundSizeFloor = size - (size % power2Division);
  return roundSizeFloor === size ? size : roundSizeFloor + power2Division;
}
