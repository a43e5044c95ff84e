/** Advice: every variant is a real simulation of the changed plan, ranked by what it saves. */
import { describe, expect, it } from 'vitest';
import { planGpu } from '../../../cli/gpus.ts';
import { parsePlan } from '../../../engine/plan/parse.ts';
import { advise, variants } from '../../../engine/search/advice.ts';
import { simulate } from '../../../engine/train/simulate.ts';

const plan = parsePlan({
  format: 'memplan.plan',
  version: 1,
  model: {
    input_features: 1024,
    layers: [
      { type: 'linear', in_features: 1024, out_features: 4096 },
      { type: 'repeat', count: 4, layers: [{ type: 'residual', layers: [{ type: 'layer_norm', normalized_shape: 4096 }, { type: 'linear', in_features: 4096, out_features: 4096 }, { type: 'gelu' }] }] },
      { type: 'linear', in_features: 4096, out_features: 1000 },
    ],
  },
  training: { batch_size: 8192, precision: 'fp32', optimizer: 'adamw' },
});
const device = planGpu(plan);

describe('advice', () => {
  it('offers the changes that apply to the plan, each a changed copy of it', () => {
    const ids = variants(plan).map((v) => v.id);
    expect(ids).toEqual(['amp_bf16', 'checkpointing', 'fused_optimizer', 'accumulation', 'expandable_segments']);
    const accumulation = variants(plan).find((v) => v.id === 'accumulation')!;
    expect(accumulation.plan.training.batch_size * accumulation.plan.training.grad_accumulation_steps).toBe(8192);
    expect(plan.training.batch_size).toBe(8192); // the plan itself is untouched
  });

  it('reports each variant as its own simulation and ranks them by memory saved', () => {
    const advice = advise(plan, { device });
    const base = simulate(plan, { device }).peakReservedBytes;
    for (const a of advice) {
      const v = variants(plan).find((x) => x.id === a.id)!;
      expect(a.peakReservedBytes).toBe(simulate(v.plan, { device }).peakReservedBytes);
      expect(a.savedBytes).toBe(base - a.peakReservedBytes);
    }
    const saved = advice.map((a) => a.savedBytes);
    expect(saved).toEqual([...saved].sort((x, y) => y - x));
    // At a batch of 8192 activations dominate: checkpointing and halving the micro-batch both save memory.
    expect(advice.find((a) => a.id === 'checkpointing')!.savedBytes).toBeGreaterThan(0);
    expect(advice.find((a) => a.id === 'accumulation')!.savedBytes).toBeGreaterThan(0);
  });
});
