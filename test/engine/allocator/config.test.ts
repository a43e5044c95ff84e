/**
 * PYTORCH_CUDA_ALLOC_CONF as PyTorch 2.11 reads it, against what it did on the H100
 * (test/fixtures/device/h100_alloc_conf_keys.json, from resources/measure/probe_alloc_keys.py: each setting in a
 * process of its own). memplan accepts what PyTorch accepts and refuses what it refuses, except two settings PyTorch
 * runs that memplan does not simulate as given, refused with what to do instead: a per-process memory fraction below
 * 1 (a cap: the plan's memory_limit_bytes) and the cudaMallocAsync backend (not the caching allocator).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { fractionCapBytes, parseAllocatorConf } from '../../../engine/allocator/config.ts';
import { InputError } from '../../../engine/errors.ts';

const measured = JSON.parse(readFileSync(new URL('../../fixtures/device/h100_alloc_conf_keys.json', import.meta.url), 'utf8')) as Record<string, { ok: boolean; err?: string; backend?: string; fraction?: number; alloc_60pct?: string } | string>;

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
  // PyTorch 2.11 accepts an odd segment size; memplan's segments are even sizes (not measured otherwise)
  'large_segment_size_mb:11': /must be an even number of MB/,
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
});
