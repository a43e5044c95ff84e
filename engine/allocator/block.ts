/**
 * `Block` and `BlockPool` of CUDACachingAllocator.cpp. A Block is a contiguous range of one segment, either
 * handed out (`allocated`) or free and cached in its pool; `prev`/`next` link the blocks of one segment in
 * address order.
 */
import type { ExpandableSegment } from './expandable-segment.ts';

export class Block {
  // Every field is set by `reuse`, the constructor included: one place says what a new block is.
  /** Size in bytes after rounding (what allocated_bytes counts). */
  size!: number;
  /** Bytes the caller asked for (requested_bytes). */
  requestedSize!: number;
  /** Device address. */
  ptr!: number;
  allocated!: boolean;
  /** In the allocator's active_blocks: handed out, or freed and waiting for its streams' events. */
  active!: boolean;
  /** Its neighbours in the allocator's list of active blocks (CachingAllocator.addActive). */
  activePrev!: Block | null;
  activeNext!: Block | null;
  /** Backed by physical pages; false only for the unmapped tail of an expandable segment. */
  mapped!: boolean;
  prev!: Block | null;
  next!: Block | null;
  /** `get_free_blocks_call_count` of the pool when the block was cached (garbage collection age). */
  gcCountBase!: number;
  expandableSegment!: ExpandableSegment | null;
  /** The caller's label for what this memory holds (a tensor's name); the trace and the peak breakdown show it. */
  label!: string | undefined;
  /**
   * The stream the block was allocated on; a free block serves only that stream. With `pool`, set only by
   * `reuse`, when the block is in no set (the sets order blocks by them).
   */
  stream!: number;
  pool!: BlockPool;

  constructor(stream: number, size: number, pool: BlockPool, ptr: number) {
    this.reuse(stream, size, pool, ptr);
  }

  /**
   * The block as new: the constructor, and the allocator's spare blocks (a Block object a merge absorbed, taken
   * for the next split: CachingAllocator.spareBlocks).
   */
  reuse(stream: number, size: number, pool: BlockPool, ptr: number): this {
    this.size = size;
    this.requestedSize = 0;
    this.ptr = ptr;
    this.allocated = false;
    this.active = false;
    this.activePrev = null;
    this.activeNext = null;
    this.mapped = true;
    this.prev = null;
    this.next = null;
    this.gcCountBase = 0;
    this.expandableSegment = null;
    this.label = undefined;
    this.stream = stream;
    this.pool = pool;
    return this;
  }

  isSplit(): boolean {
    return this.prev !== null || this.next !== null;
  }
}

/** `BlockComparatorSize`: (stream, size, ptr). */
function compareBySize(a: Block, stream: number, size: number, ptr: number): number {
  return a.stream - stream || a.size - size || a.ptr - ptr;
}

/** `BlockComparatorAddress`: (stream, ptr). */
function compareByAddress(a: Block, stream: number, ptr: number): number {
  return a.stream - stream || a.ptr - ptr;
}

/**
 * Most blocks a run of a SortedBlocks holds. Pools hold a few hundred free blocks (a GPT-2 XL or Llama 2 70B search:
 * 279 on average, 868 at most); in one sorted array every insert and erase shifted about half of them, and at small
 * batches, where most requests are small and land at the front, nearly all (Llama 2 70B at batch 1: 314 of 340).
 */
const kRunMax = 64;

/** A run shorter than this merges with its neighbour when both fit in one. */
const kRunMin = kRunMax / 4;

/** Positions are run * kStride + offset (an offset is below kRunMax). */
const kStride = 2 * kRunMax;

/**
 * A `std::set<Block*>` ordered by (stream, size, ptr) or (stream, ptr): sorted runs of at most kRunMax blocks, the
 * runs in order, found by binary search on their last blocks and then within the run (a B-tree of two levels).
 * An insert or erase shifts one run, not the whole set. A position (`lowerBound`, `next`, `prev`, `at`) stays valid
 * until the set changes, except that erasing a block keeps every position before it.
 */
export class SortedBlocks {
  private readonly runs: Block[][] = [];
  private count = 0;
  private readonly byAddress: boolean;

  constructor(byAddress: boolean) {
    this.byAddress = byAddress;
  }

  get size(): number {
    return this.count;
  }

  /** The position past the last block. */
  end(): number {
    return this.runs.length * kStride;
  }

  /** The block at a position before `end()`. */
  at(pos: number): Block {
    return this.runs[(pos / kStride) | 0]![pos % kStride]!;
  }

  /** The position after pos (`end()` after the last block). */
  next(pos: number): number {
    const r = (pos / kStride) | 0;
    return pos % kStride < this.runs[r]!.length - 1 ? pos + 1 : (r + 1) * kStride;
  }

  /** The position before pos (-1 before the first block); pos may be `end()`. */
  prev(pos: number): number {
    if (pos % kStride > 0) return pos - 1;
    const r = pos / kStride - 1;
    return r < 0 ? -1 : r * kStride + this.runs[r]!.length - 1;
  }

  /** Position of the first block not less than (stream, size, ptr) (or (stream, ptr) when ordered by address). */
  lowerBound(stream: number, size: number, ptr: number): number {
    // One search per order, each with its own comparison, not a choice per comparison: this runs several times per
    // malloc and free, and the two searches replay the recorded traces about 5% faster than one that chose.
    return this.byAddress ? this.lowerBoundByAddress(stream, ptr) : this.lowerBoundBySize(stream, size, ptr);
  }

  private lowerBoundBySize(stream: number, size: number, ptr: number): number {
    const runs = this.runs;
    let lo = 0;
    let hi = runs.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const run = runs[mid]!;
      if (compareBySize(run[run.length - 1]!, stream, size, ptr) < 0) lo = mid + 1;
      else hi = mid;
    }
    if (lo === runs.length) return lo * kStride;
    const run = runs[lo]!;
    let a = 0;
    let b = run.length;
    while (a < b) {
      const mid = (a + b) >>> 1;
      if (compareBySize(run[mid]!, stream, size, ptr) < 0) a = mid + 1;
      else b = mid;
    }
    return lo * kStride + a;
  }

  private lowerBoundByAddress(stream: number, ptr: number): number {
    const runs = this.runs;
    let lo = 0;
    let hi = runs.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const run = runs[mid]!;
      if (compareByAddress(run[run.length - 1]!, stream, ptr) < 0) lo = mid + 1;
      else hi = mid;
    }
    if (lo === runs.length) return lo * kStride;
    const run = runs[lo]!;
    let a = 0;
    let b = run.length;
    while (a < b) {
      const mid = (a + b) >>> 1;
      if (compareByAddress(run[mid]!, stream, ptr) < 0) a = mid + 1;
      else b = mid;
    }
    return lo * kStride + a;
  }

  insert(block: Block): void {
    const runs = this.runs;
    this.count++;
    if (runs.length === 0) {
      runs.push([block]);
      return;
    }
    let pos = this.lowerBound(block.stream, block.size, block.ptr);
    if (pos === this.end()) pos = this.prev(pos) + 1; // after the last block, in the last run
    const r = (pos / kStride) | 0;
    const run = runs[r]!;
    const i = pos % kStride;
    if (run[i] === block) throw new Error('block already in pool');
    // Shifted by hand (grown by one first): `splice` returns an array of what it removed, garbage on the
    // allocator's hottest path.
    run.push(block);
    for (let k = run.length - 1; k > i; k--) run[k] = run[k - 1]!;
    run[i] = block;
    if (run.length > kRunMax) runs.splice(r + 1, 0, run.splice(kRunMax / 2));
  }

  erase(block: Block): boolean {
    const pos = this.lowerBound(block.stream, block.size, block.ptr);
    if (pos === this.end() || this.at(pos) !== block) return false;
    this.removeAt(pos);
    return true;
  }

  /** Takes out the block at a position (positions before it stay valid). */
  removeAt(pos: number): void {
    const runs = this.runs;
    const r = (pos / kStride) | 0;
    const run = runs[r]!;
    const last = run.length - 1;
    for (let k = pos % kStride; k < last; k++) run[k] = run[k + 1]!;
    run.pop();
    this.count--;
    if (run.length === 0) runs.splice(r, 1);
    else if (run.length < kRunMin && r + 1 < runs.length && run.length + runs[r + 1]!.length <= kRunMax) {
      // Merged with the next run: positions before this block keep their run and offset.
      for (const b of runs[r + 1]!) run.push(b);
      runs.splice(r + 1, 1);
    }
  }

  has(block: Block): boolean {
    const pos = this.lowerBound(block.stream, block.size, block.ptr);
    return pos !== this.end() && this.at(pos) === block;
  }

  /** The blocks in order, as a new array (to go through while the set changes). */
  toArray(): Block[] {
    const all: Block[] = [];
    for (const run of this.runs) for (const b of run) all.push(b);
    return all;
  }
}

/** `BlockPool`: the free cached blocks of the small (<= 1 MiB) or the large pool. */
export class BlockPool {
  /** Free mapped blocks, by (stream, size, ptr): best fit is a lower_bound. */
  readonly blocks = new SortedBlocks(false);
  /** Unmapped tails of expandable segments, by (stream, ptr). */
  readonly unmapped = new SortedBlocks(true);
  /** Counts `get_free_block` calls while garbage collection is on; ages cached blocks. */
  getFreeBlocksCallCount = 0;
  readonly isSmall: boolean;

  constructor(isSmall: boolean) {
    this.isSmall = isSmall;
  }

  /** `BlockPool::insert_into_blocks`: cache a block, stamping its GC age. */
  insertIntoBlocks(block: Block): void {
    block.gcCountBase = this.getFreeBlocksCallCount;
    this.blocks.insert(block);
  }
}
