/**
 * `Block` and `BlockPool` of CUDACachingAllocator.cpp. A Block is a contiguous range of one segment, either
 * handed out (`allocated`) or free and cached in its pool; `prev`/`next` link the blocks of one segment in
 * address order.
 */
import type { ExpandableSegment } from './expandable-segment.ts';

export class Block {
  /** Size in bytes after rounding (what allocated_bytes counts). */
  size: number;
  /** Bytes the caller asked for (requested_bytes). */
  requestedSize = 0;
  /** Device address. */
  ptr: number;
  allocated = false;
  /** In the allocator's active_blocks: handed out, or freed and waiting for its streams' events. */
  active = false;
  /** Its neighbours in the allocator's list of active blocks (CachingAllocator.addActive). */
  activePrev: Block | null = null;
  activeNext: Block | null = null;
  /** Backed by physical pages; false only for the unmapped tail of an expandable segment. */
  mapped = true;
  prev: Block | null = null;
  next: Block | null = null;
  /** `get_free_blocks_call_count` of the pool when the block was cached (garbage collection age). */
  gcCountBase = 0;
  expandableSegment: ExpandableSegment | null = null;
  /** The caller's label for what this memory holds (a tensor's name); the trace and the peak breakdown show it. */
  label: string | undefined = undefined;

  /** The stream the block was allocated on; a free block serves only that stream. */
  readonly stream: number;
  readonly pool: BlockPool;

  constructor(stream: number, size: number, pool: BlockPool, ptr: number) {
    this.stream = stream;
    this.pool = pool;
    this.size = size;
    this.ptr = ptr;
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
 * A `std::set<Block*>` ordered by (stream, size, ptr) or (stream, ptr): a sorted array with binary search.
 * Pools hold at most a few thousand free blocks, where a sorted array beats a tree.
 */
export class SortedBlocks {
  readonly items: Block[] = [];
  private readonly byAddress: boolean;

  constructor(byAddress: boolean) {
    this.byAddress = byAddress;
  }

  get size(): number {
    return this.items.length;
  }

  /** Index of the first block not less than (stream, size, ptr) (or (stream, ptr) when ordered by address). */
  lowerBound(stream: number, size: number, ptr: number): number {
    const items = this.items;
    let lo = 0;
    let hi = items.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const c = this.byAddress ? compareByAddress(items[mid]!, stream, ptr) : compareBySize(items[mid]!, stream, size, ptr);
      if (c < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  insert(block: Block): void {
    const items = this.items;
    const i = this.lowerBound(block.stream, block.size, block.ptr);
    if (items[i] === block) throw new Error('block already in pool');
    // Shifted by hand (grown by one first): `splice` returns an array of what it removed, garbage on the
    // allocator's hottest path, and is slower for pools of thousands of blocks.
    items.push(block);
    for (let k = items.length - 1; k > i; k--) items[k] = items[k - 1]!;
    items[i] = block;
  }

  erase(block: Block): boolean {
    const i = this.lowerBound(block.stream, block.size, block.ptr);
    if (this.items[i] !== block) return false;
    this.removeAt(i);
    return true;
  }

  /** Takes out the block at index i. */
  removeAt(i: number): void {
    const items = this.items;
    const last = items.length - 1;
    for (let k = i; k < last; k++) items[k] = items[k + 1]!;
    items.pop();
  }

  has(block: Block): boolean {
    return this.items[this.lowerBound(block.stream, block.size, block.ptr)] === block;
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
