/** The search as a UI runs it: trial by trial, stoppable, and a recommendation that is never 0 when a batch fits. */
import { describe, expect, it } from 'vitest';
import { planGpu } from '../../../cli/gpus.ts';
import { findMaxBatch, maxBatchResultSchema, parsePlan, searchMaxBatch, simulate, simulateResultSchema } from '../../../engine/index.ts';

const mlp = (cap: number) =>
  parsePlan({
    format: 'memplan.plan',
    version: 1,
    model: { input_features: 1024, layers: [{ type: 'linear', in_features: 1024, out_features: 4096 }, { type: 'gelu' }, { type: 'linear', in_features: 4096, out_features: 1000 }] },
    training: { batch_size: 1, precision: 'amp_bf16' },
    gpu: { memory_limit_bytes: cap },
  });

describe('max-batch search as a generator', () => {
  it('yields each trial as it runs, and the result holds the same trials', () => {
    const plan = mlp(2 ** 30);
    const search = searchMaxBatch(plan, { device: planGpu(plan) });
    const streamed = [];
    let next = search.next();
    while (!next.done) {
      streamed.push(next.value);
      next = search.next();
    }
    expect(next.value.trials).toEqual(streamed);
    expect(streamed.map((t) => t.index)).toEqual(streamed.map((_, i) => i + 1));
    expect(maxBatchResultSchema.parse(structuredClone(next.value))).toEqual(next.value);
  });

  it('stops between trials when the host stops asking', () => {
    const plan = mlp(2 ** 30);
    const search = searchMaxBatch(plan, { device: planGpu(plan) });
    expect(search.next().done).toBe(false);
    expect(search.next().done).toBe(false);
    expect(search.return(undefined as never).done).toBe(true);
    expect(search.next().done).toBe(true);
  });

  it('recommends the margin-keeping batch, rounded down to a multiple when asked', () => {
    const plan = mlp(2 ** 30);
    const device = planGpu(plan);
    const r = findMaxBatch(plan, { device, multipleOf: 8 });
    expect(r.recommendation.reason_id).toBe('keeps_margin');
    expect(r.recommendation.batch % 8).toBe(0);
    expect(r.recommendation.batch).toBeLessThanOrEqual(r.max_batch);
    expect(r.recommendation.headroom_bytes).toBeGreaterThanOrEqual(r.recommendation.margin_bytes);
  });

  it('never recommends 0 when a batch fits: the largest, with the room it leaves (issue 13)', () => {
    // A cap a little above what batch 1 needs: every fitting batch leaves less than 5% free.
    const probe = mlp(2 ** 34);
    const need = simulate({ ...probe, training: { ...probe.training, batch_size: 1 } }, { device: planGpu(probe), timelinePoints: 0 }).peak_reserved_bytes;
    const plan = mlp(need + 2 ** 20);
    const r = findMaxBatch(plan, { device: planGpu(plan) });
    expect(r.max_batch).toBeGreaterThan(0);
    expect(r.recommendation.batch).toBe(r.max_batch);
    expect(r.recommendation.reason_id).toBe('margin_not_kept');
    expect(r.recommendation.headroom_bytes).toBeLessThan(r.recommendation.margin_bytes);
  });

  it('says nothing fits rather than recommending a batch', () => {
    const plan = mlp(2 ** 20);
    const r = findMaxBatch(plan, { device: planGpu(plan) });
    expect(r.max_batch).toBe(0);
    expect(r.recommendation).toMatchObject({ batch: 0, reason_id: 'nothing_fits' });
  });
});

describe('an out-of-memory result', () => {
  it('reports the model as described and the failing step as far as it got (issue 13)', () => {
    const plan = parsePlan({ format: 'memplan.plan', version: 1, model: { preset: 'llama-3-70b' }, training: { batch_size: 1, seq_len: 1024, precision: 'bf16' } });
    const r = simulate(plan, { device: planGpu(plan) });
    expect(simulateResultSchema.parse(structuredClone(r))).toEqual(r);
    expect(r.fits).toBe(false);
    expect(r.model.parameter_count).toBeGreaterThan(70e9); // not the 42 B loaded when it failed
    expect(r.notes.map((n) => n.id)).toContain('stopped_at_oom');
    expect(r.headroom_bytes).toBeLessThanOrEqual(r.gpu.cap_bytes);
  });
});
