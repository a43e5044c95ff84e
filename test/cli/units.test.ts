/** Byte sizes with units wherever a user types one, and --memory-fraction as set_per_process_memory_fraction computes it (issue 13). */
import { describe, expect, it } from 'vitest';
import { InputError, gpuListSchema, simulate, simulateResultSchema } from '../../engine/index.ts';
import { parseByteSize } from '../../cli/args.ts';
import { gpuCatalog, gpuDevice } from '../../cli/gpus.ts';
import { readPlanWithOverrides } from '../../cli/plan-options.ts';
import { json, refused } from './support.ts';

const GiB = 2 ** 30;
const MiB = 2 ** 20;
const plan = 'examples/mlp-fp16.plan.json';

describe('parseByteSize', () => {
  it('reads IEC and SI units and plain bytes exactly', () => {
    expect(parseByteSize('--x', '80GiB')).toBe(80 * GiB);
    expect(parseByteSize('--x', '80gib')).toBe(80 * GiB);
    expect(parseByteSize('--x', '80GB')).toBe(80e9);
    expect(parseByteSize('--x', '81920MiB')).toBe(81920 * MiB);
    expect(parseByteSize('--x', '1.5 GiB')).toBe(1.5 * GiB);
    expect(parseByteSize('--x', '0.1GB')).toBe(100_000_000); // no floating-point 99,999,999.99
    expect(parseByteSize('--x', '85899345920')).toBe(85_899_345_920);
    expect(parseByteSize('--x', '512B')).toBe(512);
  });

  it('refuses what is not a whole number of bytes or has no known unit, naming the flag', () => {
    for (const [text, message] of [
      ['1.5B', /--memory-limit: "1.5B" is not a whole number of bytes/],
      ['80G', /--memory-limit: unknown unit "G" in "80G".*write 80GiB .* or 80GB/],
      ['80 gigs', /--memory-limit: unknown unit "gigs"/],
      ['-5', /--memory-limit: expected a size such as 80GiB/],
      ['1e9', /--memory-limit: expected a size such as 80GiB.*got "1e9"/],
      ['', /--memory-limit: expected a size/],
    ] as const) {
      expect(() => parseByteSize('--memory-limit', text), text).toThrow(InputError);
      expect(() => parseByteSize('--memory-limit', text), text).toThrow(message);
    }
  });
});

describe('memory caps on the command line', () => {
  it('--memory-limit takes units; --memory-limit-bytes is the same flag', () => {
    const withUnits = simulateResultSchema.parse(json(['simulate', plan, '--memory-limit', '8GiB', '--json']));
    const inBytes = simulateResultSchema.parse(json(['simulate', plan, '--memory-limit-bytes', String(8 * GiB), '--json']));
    const bytesFlagWithUnits = simulateResultSchema.parse(json(['simulate', plan, '--memory-limit-bytes', '8192MiB', '--json']));
    expect(withUnits.gpu.cap_bytes).toBe(8 * GiB);
    expect(inBytes.gpu.cap_bytes).toBe(8 * GiB);
    expect(bytesFlagWithUnits.gpu.cap_bytes).toBe(8 * GiB);
    expect(withUnits.peak_reserved_bytes).toBe(inBytes.peak_reserved_bytes);
    expect(simulateResultSchema.parse(json(['simulate', plan, '--memory-limit', '40GB', '--json'])).gpu.cap_bytes).toBe(40e9);
  });

  it('a cap larger than the GPU is a custom GPU, unless --gpu named the GPU', () => {
    const custom = simulateResultSchema.parse(json(['simulate', plan, '--memory-limit', '81920MiB', '--json']));
    expect(custom.gpu.id).toBe('custom');
    expect(custom.gpu.cap_bytes).toBe(81920 * MiB);
    expect(refused(['simulate', plan, '--gpu', 'a100-40gb', '--memory-limit', '80GB'])).toMatch(/^memplan: --memory-limit: 80000000000 bytes is more than a100-40gb can give PyTorch/);
  });

  it('refuses a bare small number with "did you mean ... GiB?", and bad units naming the flag', () => {
    expect(refused(['max-batch', plan, '--memory-limit', '80'])).toBe(
      'memplan: --memory-limit: 80 bytes is less than the smallest segment PyTorch reserves (2 MiB): nothing could be allocated; did you mean 80GiB?',
    );
    expect(refused(['simulate', plan, '--memory-limit-bytes', '12G'])).toMatch(/^memplan: --memory-limit-bytes: unknown unit "G"/);
    expect(refused(['replay', 'test/fixtures/traces/cnn_amp_fp16.pickle.gz', '--memory-limit', '4 parsecs'])).toMatch(/^memplan: --memory-limit: unknown unit "parsecs"/);
    expect(refused(['simulate', plan, '--memory-limit', '8GiB', '--memory-limit-bytes', '8GiB'])).toMatch(/^memplan: --memory-limit: given twice/);
    expect(refused(['simulate', plan, '--memory-limit', '8GiB', '--memory-fraction', '0.5'])).toMatch(/^memplan: --memory-fraction: give --memory-limit or --memory-fraction, not both/);
  });

  it('--memory-fraction caps at static_cast<size_t>(F * total_memory) of the chosen GPU, and simulates as that cap does', () => {
    const a100 = gpuListSchema.parse(json(['gpus', '--json'])).gpus.find((g) => g.id === 'a100-40gb')!;
    const out = simulateResultSchema.parse(json(['simulate', plan, '--gpu', 'a100-40gb', '--memory-fraction', '0.3', '--json']));
    expect(out.gpu.id).toBe('a100-40gb');
    expect(out.gpu.cap_bytes).toBe(Math.floor(0.3 * a100.total_memory_bytes));
    // the same as the engine simulating the plan with that cap on that GPU
    const base = readPlanWithOverrides(plan, {});
    const capped = { ...base, gpu: { memory_limit_bytes: out.gpu.cap_bytes } };
    const direct = simulate(capped, { device: gpuDevice(capped, gpuCatalog().gpus.find((g) => g.id === 'a100-40gb')!) });
    expect(out.peak_reserved_bytes).toBe(direct.peak_reserved_bytes);
    expect(out.fits).toBe(direct.fits);
    // without --gpu: the plan's GPU (the H100)
    const h100 = gpuListSchema.parse(json(['gpus', '--json'])).gpus.find((g) => g.id === 'h100-sxm')!;
    expect(simulateResultSchema.parse(json(['simulate', plan, '--memory-fraction', '0.9', '--json'])).gpu.cap_bytes).toBe(Math.floor(0.9 * h100.total_memory_bytes));
    for (const bad of ['0', '1.5', 'half', '-0.5', '']) {
      expect(refused(['simulate', plan, '--memory-fraction', bad]), bad).toMatch(/^memplan: --memory-fraction: expected a fraction/);
    }
  });
});
