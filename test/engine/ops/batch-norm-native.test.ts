/**
 * Note [Batch norm past 2^31 elements] (engine/ops/conv.ts): ResNet-18 AMP bf16 at a batch of 6643 on the whole H100,
 * recorded alone in a fresh process (test/fixtures/boundary-suite/recordings/resnet18_amp_bf16_sgdm_whole_gpu_b6643):
 * its first batch norm's input has 5.3 billion elements, and PyTorch's native CUDA batch norm runs instead of
 * cuDNN's. The simulation makes the recording's allocations and frees, in order, through step 1 and into step 2,
 * bn1's forward (the fp32 copy for var_mean, the accumulation buffer, 16 reductions) and backward included.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { planGpu } from '../../../cli/gpus.ts';
import { parsePlan } from '../../../engine/plan/parse.ts';
import { comparableTrace } from '../../../engine/snapshot/compare.ts';
import { maybeGunzip } from '../../../engine/snapshot/gzip.ts';
import { readPickle } from '../../../engine/snapshot/pickle.ts';
import { parseSnapshot } from '../../../engine/snapshot/snapshot.ts';
import { simulate } from '../../../engine/train/simulate.ts';

const base = new URL('../../fixtures/boundary-suite/recordings/resnet18_amp_bf16_sgdm_whole_gpu_b6643', import.meta.url).pathname;

describe('batch norm past 2^31 elements runs PyTorch native kernels', () => {
  it('allocates as the H100 did at ResNet-18 AMP bf16, batch 6643, on the whole GPU', () => {
    const meta = JSON.parse(readFileSync(`${base}.json`, 'utf8'));
    const real = comparableTrace(parseSnapshot(readPickle(maybeGunzip(readFileSync(`${base}.pickle.gz`)))).trace).filter((e) => !e.startsWith('oom'));
    const plan = parsePlan(meta.plan);
    const sim: { action: string; size: number; addr: number }[] = [];
    simulate(plan, { device: planGpu(plan), untilSteady: false, onTrace: (action, addr, size) => sim.push({ action, size, addr }) });
    const simulated = comparableTrace(sim).filter((e) => !e.startsWith('oom'));
    let same = 0;
    while (same < Math.min(real.length, simulated.length) && real[same] === simulated[same]) same++;
    // bn1's forward: the fp32 copy (4 bytes an element), the 1,024 B accumulation buffer, 16 reductions of 40,960 + 256 B
    expect(real.slice(0, same)).toContain('alloc 132 21332426752');
    expect(real.slice(0, same).filter((e) => e.endsWith(' 40960') && e.startsWith('alloc')).length).toBeGreaterThanOrEqual(32);
    // through step 1 (its backward ends near event 1000) into step 2, where a cuDNN workspace the H100 refused with
    // 196,608 B more free than the segment (cudaMalloc's last bytes) is the first difference
    expect(same).toBeGreaterThan(1100);
    expect(meta.peak_allocated_bytes).toBe(83_858_208_256);
  }, 120_000);

  it('splits a batch of one by its channels and pixels (fuzz counterexample: 32,000 px, which recursed without end)', () => {
    const plan = parsePlan({ format: 'memplan.plan', version: 1, model: { preset: 'resnet18' }, training: { batch_size: 1, image_size: 32000, optimizer: 'sgd', steps: 1 }, gpu: { memory_limit_bytes: 2 ** 40 } });
    const labels: string[] = [];
    const r = simulate(plan, { device: planGpu(plan), untilSteady: false, timelinePoints: 0, peakDetails: false, onTrace: (action, _addr, _size, _stream, label) => action === 'alloc' && labels.push(label ?? '') });
    expect(r.fits).toBe(true);
    // bn1's input [1, 64, 16000, 16000]: fp32, no copy; 1.6e10 elements take pieces of its channels, then its pixels
    expect(labels.filter((l) => l === 'bn1 var_mean: reduction buffer').length).toBeGreaterThanOrEqual(32);
    expect(labels).not.toContain('bn1 var_mean: input.to(float)');
  });
});
