/**
 * The allocator's statistics, as `c10/core/CachingDeviceAllocator.h` (`DeviceStats`, `Stat`) keeps them and
 * `torch.cuda.memory_stats()` reports them.
 */

/** One statistic: `current`, its `peak`, and the totals ever added (`allocated`) and removed (`freed`). */
export class Stat {
  current = 0;
  peak = 0;
  allocated = 0;
  freed = 0;

  increase(amount: number): void {
    this.current += amount;
    if (this.current > this.peak) this.peak = this.current;
    this.allocated += amount;
  }

  decrease(amount: number): void {
    this.current -= amount;
    this.freed += amount;
  }

  resetPeak(): void {
    this.peak = this.current;
  }

  resetAccumulated(): void {
    this.allocated = 0;
    this.freed = 0;
  }
}

/** PyTorch's StatType: AGGREGATE ("all"), SMALL_POOL, LARGE_POOL. */
export const STAT_TYPE_NAMES = ['all', 'small_pool', 'large_pool'] as const;
export const AGGREGATE = 0;
export const SMALL_POOL = 1;
export const LARGE_POOL = 2;
export type PoolStatType = typeof SMALL_POOL | typeof LARGE_POOL;

/** [all, small_pool, large_pool]. */
export type StatArray = [Stat, Stat, Stat];

/** `increase_stat` on the aggregate and on one pool's stat, as `for_each_selected_stat_type` does. */
export function increaseStats(array: StatArray, pool: PoolStatType, amount: number): void {
  array[AGGREGATE].increase(amount);
  array[pool].increase(amount);
}

/** `decrease_stat` on the aggregate and on one pool's stat. */
export function decreaseStats(array: StatArray, pool: PoolStatType, amount: number): void {
  array[AGGREGATE].decrease(amount);
  array[pool].decrease(amount);
}

function statArray(): StatArray {
  return [new Stat(), new Stat(), new Stat()];
}

/** The per-pool statistics of `DeviceStats`, in the order `memory_stats()` lists them. */
export const STAT_ARRAY_NAMES = [
  'allocation',
  'segment',
  'active',
  'inactive_split',
  'allocated_bytes',
  'reserved_bytes',
  'active_bytes',
  'inactive_split_bytes',
  'requested_bytes',
] as const;

export class DeviceStats {
  /** Blocks handed out (`allocation`) and their bytes after rounding (`allocated_bytes`). */
  readonly allocation = statArray();
  readonly allocated_bytes = statArray();
  /** cudaMalloc'd segments and reserved bytes (segments plus mapped expandable pages). */
  readonly segment = statArray();
  readonly reserved_bytes = statArray();
  /** Allocated, or freed but still waiting on cross-stream events. */
  readonly active = statArray();
  readonly active_bytes = statArray();
  /** Free blocks inside partly used segments (cannot be released). */
  readonly inactive_split = statArray();
  readonly inactive_split_bytes = statArray();
  /** Bytes the callers asked for, before rounding. */
  readonly requested_bytes = statArray();
  readonly oversize_allocations = new Stat();
  readonly oversize_segments = new Stat();
  num_alloc_retries = 0;
  num_ooms = 0;
  num_sync_all_streams = 0;
  num_device_alloc = 0;
  num_device_free = 0;
  /** `max_split_size` in bytes; Infinity stands for PyTorch's SIZE_MAX (no oversize handling). */
  max_split_size: number;

  constructor(maxSplitSizeBytes: number) {
    this.max_split_size = maxSplitSizeBytes;
  }

  /** `resetPeakStats()` (`torch.cuda.reset_peak_memory_stats()`). */
  resetPeak(): void {
    for (const name of STAT_ARRAY_NAMES) for (const s of this[name]) s.resetPeak();
    this.oversize_allocations.resetPeak();
    this.oversize_segments.resetPeak();
  }

  /** `resetAccumulatedStats()` (`torch.cuda.reset_accumulated_memory_stats()`). */
  resetAccumulated(): void {
    for (const name of STAT_ARRAY_NAMES) for (const s of this[name]) s.resetAccumulated();
    this.num_alloc_retries = 0;
    this.num_ooms = 0;
    this.num_sync_all_streams = 0;
    this.num_device_alloc = 0;
    this.num_device_free = 0;
    this.oversize_allocations.resetAccumulated();
    this.oversize_segments.resetAccumulated();
  }
}

/**
 * The flat dictionary `torch.cuda.memory_stats()` returns (`torch/cuda/memory.py` flattens the nested one),
 * with keys sorted as Python's OrderedDict(sorted(...)) sorts them.
 */
export function memoryStatsDict(stats: DeviceStats): Record<string, number> {
  const flat: Record<string, number> = {};
  const addStat = (prefix: string, s: Stat) => {
    flat[`${prefix}.current`] = s.current;
    flat[`${prefix}.peak`] = s.peak;
    flat[`${prefix}.allocated`] = s.allocated;
    flat[`${prefix}.freed`] = s.freed;
  };
  for (const name of STAT_ARRAY_NAMES) {
    stats[name].forEach((s, i) => addStat(`${name}.${STAT_TYPE_NAMES[i]}`, s));
  }
  addStat('oversize_allocations', stats.oversize_allocations);
  addStat('oversize_segments', stats.oversize_segments);
  flat['num_alloc_retries'] = stats.num_alloc_retries;
  flat['num_ooms'] = stats.num_ooms;
  flat['num_sync_all_streams'] = stats.num_sync_all_streams;
  flat['num_device_alloc'] = stats.num_device_alloc;
  flat['num_device_free'] = stats.num_device_free;
  // DeviceStats::max_split_size is an int64_t: SIZE_MAX (unset) reads as -1.
  flat['max_split_size'] = Number.isFinite(stats.max_split_size) ? stats.max_split_size : -1;
  const sorted: Record<string, number> = {};
  for (const key of Object.keys(flat).sort()) sorted[key] = flat[key]!;
  return sorted;
}
