/**
 * PYTORCH_CUDA_ALLOC_CONF as PyTorch 2.11 reads it, against what it did on the H100
 * (test/fixtures/device/h100_alloc_conf_keys.json, from resources/measure/probe_alloc_keys.py: each setting in a
 * process of its own). memplan accepts what PyTorch accepts and refuses what it refuses, except two settings PyTorch
 * runs that memplan does not simulate as given, refused with what to do instead: a per-process memory fraction below
 * 1 (a cap: the plan's memory_limit_bytes) and the cudaMallocAsync backend (not the caching allocator).
 * large_segment_size_mb as c10/core/AllocatorConfig.cpp reads it (Note [large_segment_size_mb]).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { formatAllocatorConf, fractionCapBytes, parseAllocatorConf } from '../../../engine/allocator/config.ts';
import { CachingAllocator } from '../../../engine/allocator/caching-allocator.ts';
import { SimulatedDevice } from '../../../engine/allocator/device-memory.ts';
import { InputError } from '../../../engine/errors.ts';

const MiB = 1_048_576;
const measured = JSON.parse(readFileSync(new URL('../../fixtures/device/h100_alloc_conf_keys.json', import.meta.url), 'utf8')) as Record<string, { ok: boolean; err?: string; backend?: string; fraction?: number; alloc_60pct?: string; segment_5mib?: number | string } | string>;

/** memplan's parse: null when accepted, else its message. */
function refusal(conf: string): string | null {
  try {
    parseAllocatorConf(conf, 'allocator.conf');
    return null;
  } catch (error) {
    if (!(error instanceof InputError)) throw error;
    return error.message;
  }
}

/** Accepted by PyTorch and refused by memplan on purpose, with what the message says to do. */
const NOT_SIMULATED_AS_GIVEN: Record<string, RegExp> = {
  'per_process_memory_fraction:0.5': /caps the memory PyTorch may use at 0\.5 of the GPU's.*memory_limit_bytes \(the CLI's --memory-fraction 0\.5\)/,
  'backend:cudaMallocAsync': /memplan simulates the caching allocator \(backend:native\) only/,
  // PyTorch accepts it and fails its first large-pool request ("CUDA driver error: invalid argument", measured)
  'expandable_segments:True,large_segment_size_mb:11': /fails in PyTorch: the large pool maps pages of 11 MiB/,
};

describe('PYTORCH_CUDA_ALLOC_CONF, as PyTorch 2.11 read it on the H100', () => {
  const cases = Object.entries(measured).filter(([key]) => key !== 'torch');

  it('was measured with PyTorch 2.11', () => {
    expect(measured['torch']).toMatch(/^2\.11\./);
    expect(cases.length).toBeGreaterThanOrEqual(16);
  });

  for (const [conf, run] of cases) {
    if (typeof run === 'string') continue;
    it(`${conf}: ${run.ok ? 'accepted' : 'refused'} by PyTorch`, () => {
      const said = refusal(conf);
      if (conf in NOT_SIMULATED_AS_GIVEN) {
        expect(run.ok).toBe(true);
        expect(said).toMatch(NOT_SIMULATED_AS_GIVEN[conf]!);
      } else if (run.ok) expect(said).toBeNull();
      else expect(said, `PyTorch: ${run.err}`).not.toBeNull();
    });
  }

  it('a 5 MiB request reserves the segment PyTorch reserved for it (large_segment_size_mb: 11, 11.5, 40, expandable 40)', () => {
    let compared = 0;
    for (const [conf, run] of cases) {
      if (typeof run === 'string' || typeof run.segment_5mib !== 'number' || conf in NOT_SIMULATED_AS_GIVEN) continue;
      const allocator = new CachingAllocator({ config: parseAllocatorConf(conf), device: new SimulatedDevice(), totalGlobalMemBytes: 80 * 1024 * MiB });
      allocator.malloc(1024 * 4, 0, '1 KiB of float32');
      const before = allocator.reservedBytes;
      allocator.malloc(5 * MiB, 0, '5 MiB');
      expect(allocator.reservedBytes - before, conf).toBe(run.segment_5mib);
      compared++;
    }
    expect(compared).toBeGreaterThanOrEqual(10);
    expect((measured['expandable_segments:True,large_segment_size_mb:11'] as { segment_5mib: string }).segment_5mib).toBe('CUDA driver error: invalid argument');
  });

  it("a recorded run's settings (a snapshot's) read as the PyTorch that ran them accepted them", () => {
    const config = parseAllocatorConf('per_process_memory_fraction:0.5,throw_on_cudamalloc_oom:True,expandable_segments:true,pinned_num_register_threads:256', 'snapshot allocator_settings', { recorded: true });
    expect(config.perProcessMemoryFraction).toBe(0.5);
    expect(config.expandableSegments).toBe(true);
    expect(fractionCapBytes(config, 85_017_493_504)).toBe(42_508_746_752);
    expect(fractionCapBytes(parseAllocatorConf('', 'x', { recorded: true }), 85_017_493_504)).toBeUndefined();
    expect(() => parseAllocatorConf('backend:cudaMallocAsync', 'x', { recorded: true })).toThrow(/cudaMallocAsync/);
  });

  it('a fraction below 1 is the cap set_per_process_memory_fraction sets (what memplan asks to give as memory_limit_bytes)', () => {
    const run = measured['per_process_memory_fraction:0.5'] as { fraction: number; alloc_60pct: string };
    expect(run.fraction).toBe(0.5);
    expect(run.alloc_60pct).toContain('39.59 GiB allowed'); // 0.5 x the H100's 79.18 GiB
    expect(refusal('per_process_memory_fraction:1')).toBeNull(); // no cap
    expect(refusal('per_process_memory_fraction:1.5')).toMatch(/must be in \[0\.0, 1\.0\]/);
  });

  it('large_segment_size_mb: any whole number of MB above 10, odd ones too (11 ran on the H100)', () => {
    expect((measured['large_segment_size_mb:11'] as { ok: boolean }).ok).toBe(true);
    expect(parseAllocatorConf('large_segment_size_mb:11').largeSegmentSizeBytes).toBe(11 * MiB);
    expect(parseAllocatorConf('large_segment_size_mb:40').largeSegmentSizeBytes).toBe(40 * MiB);
    // toSizeT is std::stoull: the fraction is dropped, so 11.5 is 11 and 10.5 is 10
    expect(parseAllocatorConf('large_segment_size_mb:11.5').largeSegmentSizeBytes).toBe(11 * MiB);
    // `val_env > kMinLargeAlloc / kMB`: "CachingAllocator option large_segment_size_mb must be > 10 MB"
    expect(refusal('large_segment_size_mb:10')).toBe('allocator.conf large_segment_size_mb: must be more than 10 (MB), got 10');
    expect(refusal('large_segment_size_mb:10.5')).toMatch(/must be more than 10 \(MB\), got 10\.5$/);
    expect(refusal('large_segment_size_mb:0')).toMatch(/must be more than 10 \(MB\)/);
    expect(refusal('large_segment_size_mb:-5')).toMatch(/must be more than 10 \(MB\)/);
  });

  it('large_segment_size_mb is read before the other keys and sets what max_split_size_mb and max_non_split_rounding_mb allow', () => {
    // min_allowed_split_size_mb = large_segment_size_ / kMB, wherever the key stands in the string
    expect(refusal('max_split_size_mb:30,large_segment_size_mb:40')).toBe('allocator.conf max_split_size_mb: must be at least 40 (MB) when large_segment_size_mb is 40, got 30');
    expect(refusal('large_segment_size_mb:40,max_non_split_rounding_mb:21')).toMatch(/max_non_split_rounding_mb: must be at least 40 \(MB\) when large_segment_size_mb is 40, got 21$/);
    const small = parseAllocatorConf('max_split_size_mb:12,large_segment_size_mb:11');
    expect(small.maxSplitSizeBytes).toBe(12 * MiB); // below the 20 refused without it
    expect(refusal('max_split_size_mb:12')).toBe('allocator.conf max_split_size_mb: must be at least 20 (MB), got 12');
    // max_non_split_rounding_size_ = large_segment_size_ unless given
    expect(small.maxNonSplitRoundingBytes).toBe(11 * MiB);
    expect(parseAllocatorConf('large_segment_size_mb:11,max_non_split_rounding_mb:30').maxNonSplitRoundingBytes).toBe(30 * MiB);
    expect(parseAllocatorConf('').maxNonSplitRoundingBytes).toBe(20 * MiB);
    // written back as PyTorch reads it
    for (const conf of ['large_segment_size_mb:11', 'large_segment_size_mb:11,max_non_split_rounding_mb:30', 'max_non_split_rounding_mb:30', 'large_segment_size_mb:40,max_split_size_mb:40']) {
      expect(parseAllocatorConf(formatAllocatorConf(parseAllocatorConf(conf)))).toEqual(parseAllocatorConf(conf));
    }
    expect(formatAllocatorConf(parseAllocatorConf('large_segment_size_mb:11'))).toBe('large_segment_size_mb:11');
  });

  it('an odd large_segment_size_mb with expandable segments is refused: its pages are not whole 2 MiB GPU pages for cuMemCreate', () => {
    const said = refusal('expandable_segments:True,large_segment_size_mb:11');
    expect(said).toMatch(/^allocator\.conf large_segment_size_mb: large_segment_size_mb 11 with expandable_segments:True fails in PyTorch: the large pool maps pages of 11 MiB, and cuMemCreate takes only multiples of the GPU's 2 MiB page/);
    expect(said).toMatch(/give an even large_segment_size_mb, or leave expandable segments off$/);
    expect(refusal('large_segment_size_mb:11,expandable_segments:False')).toBeNull();
    const even = parseAllocatorConf('expandable_segments:True,large_segment_size_mb:12');
    expect([even.expandableSegments, even.largeSegmentSizeBytes]).toEqual([true, 12 * MiB]);
    // a recorded run's settings replay as they ran
    expect(parseAllocatorConf('expandable_segments:True,large_segment_size_mb:11', 'snapshot allocator_settings', { recorded: true }).largeSegmentSizeBytes).toBe(11 * MiB);
    // once probe_alloc_keys.py has recorded it: the first large-pool request (60% of the GPU) fails in the driver
    const probed = measured['expandable_segments:True,large_segment_size_mb:11'];
    if (typeof probed === 'object') expect(probed.alloc_60pct).toMatch(/CUDA driver error/);
  });
});
