/**
 * Allocator settings: the `PYTORCH_CUDA_ALLOC_CONF` string, parsed as
 * `c10/core/AllocatorConfig.cpp` (`AcceleratorAllocatorConfig::parseArgs`) and
 * `c10/cuda/CUDAAllocatorConfig.cpp` do. Keys that change nothing memplan simulates
 * (pinned_*, release_lock_on_cudamalloc, ...) are accepted and ignored, as PyTorch accepts them.
 */
import { InputError } from '../errors.ts';
import { kLargeBuffer, kMinLargeAlloc, kNoMaxSplitSize, kRoundUpPowerOfTwoIntervals, kSmallBuffer } from './constants.ts';

/*
 * Note [large_segment_size_mb]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * PyTorch 2.11 accepts any whole number of MB above 10, odd ones too (measured on the H100: 11 and 40 run,
 * test/fixtures/device/h100_alloc_conf_keys.json from resources/measure/probe_alloc_keys.py). The source read is
 * c10/core/AllocatorConfig.cpp of a pytorch/pytorch mirror after the key landed (PR #172056); the v2.11 tag itself
 * could not be read here. `parseArgs` reads this key before every other, wherever it stands;
 * `parseLargeSegmentSize` takes `toSizeT` (std::stoull: "11.5" reads 11) and checks `val_env > kMinLargeAlloc / kMB`
 * ("CachingAllocator option large_segment_size_mb must be > 10 MB"), with no rounding. The size then
 * - is the segment of a 1-10 MiB request (`get_allocation_size` returns `large_segment_size()`), odd or even: a
 *   cudaMalloc of 11 MiB serves as one of 20 MiB does;
 * - is the default of max_non_split_rounding_mb (`max_non_split_rounding_size_ = large_segment_size_` after that
 *   first pass) and the least value max_split_size_mb and max_non_split_rounding_mb accept
 *   (`min_allowed_split_size_mb = large_segment_size_ / kMB`, where older versions had the constant 20);
 * - is the page of the large pool's expandable segments (`find_expandable_block`: `pool->is_small ? kSmallBuffer :
 *   large_segment_size()`), each page one `cuMemCreate(segment_size_)`. The CUDA driver takes only sizes that are a
 *   multiple of the allocation granularity (cuMemGetAllocationGranularity; the 2 MiB GPU page of Note [Expandable
 *   Segments]), so with expandable_segments:True an odd number of MB fails the first large-pool request with a CUDA
 *   driver error (C10_CUDA_DRIVER_CHECK in `ExpandableSegment::map`); memplan refuses that combination
 *   (`runFailure`).
 * Measured on the H100 with PyTorch 2.11 (the same fixture): a 5 MiB request reserves 11 MiB under 11 and 11.5,
 * 40 MiB under 40 with or without expandable segments; 10 is refused ("must be > 10 MB"), max_split_size_mb:30 under
 * 40 too ("must be >= 40"), max_split_size_mb:12 under 11 accepted; with expandable segments, 11 fails the 5 MiB
 * request with "CUDA driver error: invalid argument".
 */

export interface AllocatorConfig {
  /** Blocks of at least this size are never split (`max_split_size_mb`); Infinity = off. */
  maxSplitSizeBytes: number;
  /** An oversize block serves requests up to this much smaller (`max_non_split_rounding_mb`). */
  maxNonSplitRoundingBytes: number;
  /** `garbage_collection_threshold`, in (0, 1); 0 = off. Acts only under a memory fraction. */
  garbageCollectionThreshold: number;
  /** `roundup_power2_divisions`, one entry per power-of-two interval (see roundupPower2Divisions). */
  roundupPower2Divisions: number[];
  /** `expandable_segments:True`. */
  expandableSegments: boolean;
  /**
   * `large_segment_size_mb`: segment of 1-10 MiB requests and page of the large expandable pool; also the default
   * of maxNonSplitRoundingBytes and the least max_split_size_mb (Note [large_segment_size_mb]).
   */
  largeSegmentSizeBytes: number;
  /**
   * `per_process_memory_fraction` (1: no cap). Read for a replay only (`fractionIsCap`): a plan gives its cap as
   * memory_limit_bytes. Below 1 it caps reserved memory at floor(fraction x totalGlobalMem), as
   * set_per_process_memory_fraction does (`fractionCapBytes`).
   */
  perProcessMemoryFraction: number;
}

const MiB = 1_048_576;

export function defaultAllocatorConfig(): AllocatorConfig {
  return {
    maxSplitSizeBytes: kNoMaxSplitSize,
    maxNonSplitRoundingBytes: kLargeBuffer,
    garbageCollectionThreshold: 0,
    roundupPower2Divisions: new Array<number>(kRoundUpPowerOfTwoIntervals).fill(0),
    expandableSegments: false,
    largeSegmentSizeBytes: kLargeBuffer,
    perProcessMemoryFraction: 1,
  };
}

/** The cap a recorded per_process_memory_fraction set (`allowed_memory_maximum`), or undefined for none. */
export function fractionCapBytes(config: AllocatorConfig, totalGlobalMemBytes: number): number | undefined {
  return config.perProcessMemoryFraction < 1 ? Math.floor(config.perProcessMemoryFraction * totalGlobalMemBytes) : undefined;
}

/**
 * Keys PyTorch 2.11 accepts that do not change what memplan simulates: host (pinned) memory, the lock around
 * cudaMalloc, CUDA-graph capture (and their HIP names). Measured on the H100 (resources/measure/probe_alloc_keys.py,
 * test/fixtures/device/h100_alloc_conf_keys.json): PyTorch 2.11 refuses any other key ("Unrecognized key ... in CUDA
 * allocator config"), throw_on_cudamalloc_oom and expandable_segments_reserve of later versions included.
 */
const IGNORED_KEYS = new Set([
  'release_lock_on_cudamalloc',
  'release_lock_on_hipmalloc',
  'pinned_use_cuda_host_register',
  'pinned_use_hip_host_register',
  'pinned_use_background_threads',
  'pinned_reserve_segment_size_mb',
  'graph_capture_record_stream_reuse',
]);

function isPowerOfTwo(n: number): boolean {
  return Number.isInteger(n) && n > 0 && (n & (n - 1)) === 0;
}

function parseNumber(field: string, text: string): number {
  const value = Number(text);
  if (text.trim() === '' || !Number.isFinite(value)) throw new InputError(field, `expected a number, got "${text}"`);
  return value;
}

function parseDivision(field: string, text: string): number {
  const value = parseNumber(field, text);
  if (value !== 0 && !isPowerOfTwo(value)) throw new InputError(field, `each division must be 0 or a power of 2, got ${text}`);
  return value;
}

/**
 * `roundup_power2_divisions:N` (a power of 2: PyTorch refuses 0 here, "For roundups, the divisions has to be power
 * of 2") or `roundup_power2_divisions:[64:8,256:4,>:1]` (keys in MB, powers of two; a division of 0 turns it off).
 */
function parseRoundupDivisions(field: string, text: string): number[] {
  const divisions = new Array<number>(kRoundUpPowerOfTwoIntervals).fill(0);
  if (!text.startsWith('[')) {
    const value = parseNumber(field, text);
    if (!isPowerOfTwo(value)) throw new InputError(field, `the divisions must be a power of 2, got ${text}`);
    return divisions.fill(value);
  }
  if (!text.endsWith(']')) throw new InputError(field, `expected a list like [64:8,256:4,>:1], got "${text}"`);
  let lastIndex = -1;
  let first = true;
  for (const entry of text.slice(1, -1).split(',')) {
    const [key, value, extra] = entry.split(':');
    if (key === undefined || value === undefined || extra !== undefined) {
      throw new InputError(field, `expected entries SIZE_MB:DIVISIONS, got "${entry}"`);
    }
    const division = parseDivision(field, value);
    if (key.trim() === '>') {
      for (let i = lastIndex + 1; i < kRoundUpPowerOfTwoIntervals; i++) divisions[i] = division;
      continue;
    }
    const sizeMb = parseNumber(field, key);
    if (!isPowerOfTwo(sizeMb)) throw new InputError(field, `each size must be a power of 2 in MB, got ${key}`);
    const index = Math.min(Math.log2(sizeMb), kRoundUpPowerOfTwoIntervals - 1);
    if (first) for (let i = 0; i < index; i++) divisions[i] = division; // the first key also fills the intervals below it
    if (index <= lastIndex) throw new InputError(field, 'sizes must increase');
    divisions[index] = division;
    lastIndex = index;
    first = false;
  }
  return divisions;
}

/** `True` or `False`, as PyTorch's tokenizer reads them (measured: "true" is refused). */
function parseBool(field: string, text: string, recorded = false): boolean {
  if (text === 'True' || (recorded && text === 'true')) return true;
  if (text === 'False' || (recorded && text === 'false')) return false;
  throw new InputError(field, `expected True or False (capitalized, as PyTorch reads them), got "${text}"`);
}

/** The conf's `key:value` entries, split on commas outside brackets (roundup_power2_divisions:[64:8,256:4] holds commas). */
function confEntries(conf: string): string[] {
  const entries: string[] = [];
  let depth = 0;
  let current = '';
  for (const ch of conf) {
    if (ch === '[') depth++;
    if (ch === ']') depth--;
    if (ch === ',' && depth === 0) {
      entries.push(current.trim());
      current = '';
    } else current += ch;
  }
  entries.push(current.trim());
  return entries.filter((entry) => entry !== '');
}

function keyValue(entry: string): { key: string; value: string } | null {
  const colon = entry.indexOf(':');
  return colon < 0 ? null : { key: entry.slice(0, colon).trim(), value: entry.slice(colon + 1).trim() };
}

/**
 * `AcceleratorAllocatorConfig::parseLargeSegmentSize`: a whole number of MB (std::stoull drops a fraction) above
 * kMinLargeAlloc's 10 (Note [large_segment_size_mb]). stoull would also read "-5", as 2^64 - 5 (PyTorch then
 * clamps it to the largest size and every 1-10 MiB request runs out of memory): refused here as no size.
 */
function parseLargeSegmentSize(field: string, text: string): number {
  const mb = Math.floor(parseNumber(field, text));
  const leastMb = kMinLargeAlloc / MiB;
  if (!(mb > leastMb)) throw new InputError(field, `must be more than ${leastMb} (MB), got ${text}`);
  return mb * MiB;
}

/**
 * Parses a `PYTORCH_CUDA_ALLOC_CONF` string such as `expandable_segments:True,max_split_size_mb:128`.
 * Values are checked as PyTorch 2.11 checks them (e.g. max_split_size_mb must be at least 20, or the
 * large_segment_size_mb given). `recorded`: the settings a snapshot recorded, which its PyTorch, maybe another
 * version, accepted: keys this one does not simulate are ignored whatever they are, booleans in any case; only what
 * memplan cannot replay is refused (the cudaMallocAsync backend). `fractionIsCap` (a replay's settings, recorded or
 * typed for it): a per_process_memory_fraction is the cap it sets (`fractionCapBytes`); a plan gives its cap as
 * memory_limit_bytes. Settings PyTorch accepts and then fails with are refused too (`runFailure`), unless recorded
 * or `runnable` is false.
 */
export function parseAllocatorConf(conf: string, fieldName = 'PYTORCH_CUDA_ALLOC_CONF', options: { recorded?: boolean; fractionIsCap?: boolean; runnable?: boolean } = {}): AllocatorConfig {
  const recorded = options.recorded ?? false;
  const fractionIsCap = recorded || (options.fractionIsCap ?? false);
  const config = defaultAllocatorConfig();
  const entries = confEntries(conf);
  // large_segment_size_mb first, wherever it stands (Note [large_segment_size_mb]): it sets the default of
  // max_non_split_rounding_mb and the least value of it and of max_split_size_mb
  let largeSegmentGiven = false;
  for (const entry of entries) {
    const kv = keyValue(entry);
    if (kv?.key !== 'large_segment_size_mb') continue;
    config.largeSegmentSizeBytes = parseLargeSegmentSize(`${fieldName} ${kv.key}`, kv.value);
    largeSegmentGiven = true;
  }
  config.maxNonSplitRoundingBytes = config.largeSegmentSizeBytes;
  const leastSplitMb = config.largeSegmentSizeBytes / MiB;
  const splitSize = (field: string, text: string): number => {
    const mb = parseNumber(field, text);
    if (mb < leastSplitMb) throw new InputError(field, `must be at least ${leastSplitMb} (MB)${largeSegmentGiven ? ` when large_segment_size_mb is ${leastSplitMb}` : ''}, got ${text}`);
    return Math.floor(mb) * MiB;
  };
  for (const entry of entries) {
    const kv = keyValue(entry);
    if (!kv) throw new InputError(fieldName, `expected key:value, got "${entry}"`);
    const { key, value } = kv;
    const field = `${fieldName} ${key}`;
    switch (key) {
      case 'large_segment_size_mb':
        break; // read first
      case 'max_split_size_mb':
        config.maxSplitSizeBytes = splitSize(field, value);
        break;
      case 'max_non_split_rounding_mb':
        config.maxNonSplitRoundingBytes = splitSize(field, value);
        break;
      case 'garbage_collection_threshold': {
        const t = parseNumber(field, value);
        if (!(t > 0 && t < 1)) throw new InputError(field, `must be between 0.0 and 1.0 (exclusive), got ${value}`);
        config.garbageCollectionThreshold = t;
        break;
      }
      case 'roundup_power2_divisions':
        config.roundupPower2Divisions = parseRoundupDivisions(field, value);
        break;
      case 'expandable_segments':
        config.expandableSegments = parseBool(field, value, recorded);
        break;
      case 'backend':
        // cudaMallocAsync replaces the caching allocator (CUDAMallocAsyncAllocator.cpp: a cudaMallocAsync of each
        // request from CUDA's pool, no blocks, segments or rounding): nothing memplan simulates applies
        if (value === 'cudaMallocAsync') throw new InputError(field, "cudaMallocAsync replaces PyTorch's caching allocator with CUDA's stream-ordered allocator (no blocks, segments or rounding): memplan simulates the caching allocator (backend:native) only");
        if (value !== 'native') throw new InputError(field, `unknown allocator backend "${value}": PyTorch's options are native and cudaMallocAsync`);
        break;
      case 'per_process_memory_fraction': {
        // PyTorch 2.11 caps reserved memory with it when the allocator starts, as set_per_process_memory_fraction
        // does (measured: 0.5 on the H100, "39.59 GiB allowed")
        const f = parseNumber(field, value);
        if (!(f >= 0 && f <= 1)) throw new InputError(field, `must be in [0.0, 1.0], got ${value}`);
        if (f < 1 && !fractionIsCap) throw new InputError(field, `caps the memory PyTorch may use at ${value} of the GPU's, as torch.cuda.set_per_process_memory_fraction does: give the cap to memplan as the plan's gpu.memory_limit_bytes (the CLI's --memory-fraction ${value}) instead`);
        config.perProcessMemoryFraction = f;
        break;
      }
      case 'pinned_num_register_threads': {
        if (recorded) break;
        const n = parseNumber(field, value);
        if (!isPowerOfTwo(n) || n > 128) throw new InputError(field, `must be a power of 2 up to 128, got ${value}`);
        break;
      }
      default:
        if (!IGNORED_KEYS.has(key) && !recorded) throw new InputError(fieldName, `unknown allocator setting "${key}" (PyTorch 2.11 refuses it too)`);
    }
  }
  // what PyTorch accepts and then fails with; a recorded run's settings replay as they ran
  const failure = recorded || options.runnable === false ? null : runFailure(config);
  if (failure) throw new InputError(`${fieldName} large_segment_size_mb`, failure);
  return config;
}

/**
 * Why PyTorch 2.11 fails at run time with settings it accepts, or null. One case: expandable segments whose large
 * pool would map pages of an odd number of MB, which cuMemCreate refuses (Note [large_segment_size_mb]).
 */
export function runFailure(config: AllocatorConfig): string | null {
  if (!config.expandableSegments || config.largeSegmentSizeBytes % kSmallBuffer === 0) return null;
  const mb = config.largeSegmentSizeBytes / MiB;
  return `large_segment_size_mb ${mb} with expandable_segments:True fails in PyTorch: the large pool maps pages of ${mb} MiB, and cuMemCreate takes only multiples of the GPU's 2 MiB page, so the first request above 1 MiB raises a CUDA driver error; give an even large_segment_size_mb, or leave expandable segments off`;
}

/**
 * What PyTorch fails at run time with a conf it accepts (`runFailure`), or null: for a variant of a valid plan,
 * made after the plan was checked (advice adds expandable_segments:True to the plan's own settings).
 */
export function allocatorRunFailure(conf: string): string | null {
  return runFailure(parseAllocatorConf(conf, 'allocator.conf', { runnable: false }));
}

/** `AcceleratorAllocatorConfig::roundup_power2_divisions(size)`: the divisions of size's power-of-two interval. */
export function roundupPower2Divisions(config: AllocatorConfig, size: number): number {
  const log2 = Math.floor(Math.log2(size));
  const index = Math.min(Math.max(0, log2 - 20), kRoundUpPowerOfTwoIntervals - 1);
  return config.roundupPower2Divisions[index] ?? 0;
}

/** The settings as a `PYTORCH_CUDA_ALLOC_CONF` string (only what differs from the defaults). */
export function formatAllocatorConf(config: AllocatorConfig): string {
  const d = defaultAllocatorConfig();
  const parts: string[] = [];
  if (config.expandableSegments) parts.push('expandable_segments:True');
  if (config.maxSplitSizeBytes !== d.maxSplitSizeBytes) parts.push(`max_split_size_mb:${config.maxSplitSizeBytes / MiB}`);
  // its default is the large segment size (Note [large_segment_size_mb])
  if (config.maxNonSplitRoundingBytes !== config.largeSegmentSizeBytes) parts.push(`max_non_split_rounding_mb:${config.maxNonSplitRoundingBytes / MiB}`);
  if (config.garbageCollectionThreshold) parts.push(`garbage_collection_threshold:${config.garbageCollectionThreshold}`);
  if (config.roundupPower2Divisions.some((v) => v !== 0)) {
    const all = config.roundupPower2Divisions;
    parts.push(`roundup_power2_divisions:${all.every((v) => v === all[0]) ? all[0] : `[${all.map((v, i) => `${2 ** i}:${v}`).join(',')}]`}`);
  }
  if (config.largeSegmentSizeBytes !== d.largeSegmentSizeBytes) parts.push(`large_segment_size_mb:${config.largeSegmentSizeBytes / MiB}`);
  if (config.perProcessMemoryFraction < 1) parts.push(`per_process_memory_fraction:${config.perProcessMemoryFraction}`);
  return parts.join(',');
}
