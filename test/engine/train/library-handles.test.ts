/**
 * Note [Library handles] (engine/train/simulate.ts): the first backward's thread creates its cuBLAS and cuDNN
 * handles outside the allocator, and a run whose step-1 forward reserved their room fails there. Checked against
 * the whole-GPU ResNet-18 AMP bf16 runs of the boundary suite (H100, each alone in a fresh process): at 6645 and 6649
 * they failed creating a handle in step 1, with the peaks memplan reaches before the same failure.
 */
import { describe, expect, it } from 'vitest';
import { loadSuite } from '../../../bench/boundary-suite.ts';
import { planGpu } from '../../../cli/gpus.ts';
import { memoryAvailableToPyTorch } from '../../../engine/gpu/catalog.ts';
import { parsePlan } from '../../../engine/plan/parse.ts';
import { simulate } from '../../../engine/train/simulate.ts';

const suiteCase = loadSuite().find((c) => c.name === 'resnet18_amp_bf16_sgdm_whole_gpu')!;
const run = (batch: number) => {
  const plan = parsePlan({ ...suiteCase.plan, training: { ...suiteCase.plan.training, batch_size: batch, steps: suiteCase.steps_per_trial } });
  return simulate(plan, { device: planGpu(plan), timelinePoints: 0, peakDetails: false, untilSteady: false });
};

describe('the first backward creates its library handles outside the allocator', () => {
  it.each([6645, 6649])('fails at batch %i in step 1 when the forward reserved their room, as on the H100', (batch) => {
    const real = suiteCase.trials.find((t) => t.batch === batch)!;
    expect(real.fits).toBe(false);
    const r = run(batch);
    expect(r.fits).toBe(false);
    expect(r.oom).toMatchObject({ step: 1, phase: 'backward' });
    expect(r.oom!.message).toMatch(/^CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate\(handle\)`/);
    // the real run allocated and reserved exactly as much before it failed
    expect(r.peak_allocated_bytes).toBe(real.peak_allocated_bytes);
    expect(r.peak_reserved_bytes).toBe(real.peak_reserved_bytes);
    // more than a training process can keep once the handles exist
    expect(r.peak_reserved_bytes).toBeGreaterThan(memoryAvailableToPyTorch(planGpu(parsePlan(suiteCase.plan))));
  }, 60_000);

  it('keeps what is left after them from then on: a run that fits never reserves past it after step 1', () => {
    const r = run(6641);
    expect(r.fits).toBe(true);
    const available = memoryAvailableToPyTorch(planGpu(parsePlan(suiteCase.plan)));
    for (const s of r.steps.slice(1)) expect(s.peak_reserved_bytes).toBeLessThanOrEqual(available);
  }, 60_000);
});
