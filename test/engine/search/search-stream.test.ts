/** The search as a UI runs it: trial by trial, stoppable, and a recommendation that is never 0 when a batch fits. */
import { describe, expect, it } from 'vitest';
import { deviceFor, gpuCatalog, planGpu } from '../../../cli/gpus.ts';
import { findMaxBatch, maxBatchResultSchema, parsePlan, searchMaxBatch, simulate, simulateResultSchema } from '../../../engine/index.ts';
import { neededText, noteText, recommendationText } from '../../../cli/words.ts';

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

  it('with a multiple above the recommendation: the recommendation as it is, and the words say no multiple qualifies', () => {
    const plan = mlp(2 ** 30);
    const device = planGpu(plan);
    const r = findMaxBatch(plan, { device, multipleOf: 2 ** 20 });
    expect(r.recommendation.batch).toBe(findMaxBatch(plan, { device }).recommendation.batch);
    expect(r.recommendation.batch).toBeLessThan(2 ** 20);
    expect(recommendationText(r.recommendation, r.cap_bytes)).toContain('; no multiple of 1048576 qualifies');
    expect(recommendationText(r.recommendation, r.cap_bytes)).not.toContain('rounded down');
    const rounded = findMaxBatch(plan, { device, multipleOf: 8 });
    expect(recommendationText(rounded.recommendation, rounded.cap_bytes)).toContain(', rounded down to a multiple of 8;');
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

  it('says nothing fits rather than recommending a batch, and what the plan needs and where it fits (issue 10)', () => {
    const plan = mlp(4 * 2 ** 20); // 4 MiB: the weights alone are 20 MiB
    const catalog = gpuCatalog().gpus.map((g) => deviceFor(g));
    const r = findMaxBatch(plan, { device: planGpu(plan), catalog });
    expect(r.max_batch).toBe(0);
    expect(r.recommendation).toMatchObject({ batch: 0, reason_id: 'nothing_fits' });
    expect(maxBatchResultSchema.parse(structuredClone(r))).toEqual(r);
    // what it needs: batch 1 without the cap, simulated as a plan would be on that GPU
    const { gpu: _cap, ...uncapped } = plan;
    const free = simulate({ ...uncapped, training: { ...plan.training, batch_size: 1 } }, { device: planGpu(plan), timelinePoints: 0 });
    expect(r.needed).toMatchObject({ peak_reserved_bytes: free.peak_reserved_bytes, peak_allocated_bytes: free.peak_allocated_bytes });
    expect(r.needed!.peak_reserved_bytes).toBeGreaterThan(r.cap_bytes);
    // a small MLP fits every catalog GPU at batch 1
    expect(r.needed!.fits_on.map((g) => g.id).sort()).toEqual(catalog.map((g) => g.id).sort());
  });

  it('lists only the catalog GPUs a plan fits on when nothing fits on its own (issue 10)', () => {
    const plan = parsePlan({ format: 'memplan.plan', version: 1, model: { preset: 'llama-3-8b' }, training: { batch_size: 1, seq_len: 1024, precision: 'bf16', optimizer: 'adamw' }, gpu: { name: 'rtx-4090' } });
    const catalog = gpuCatalog().gpus.map((g) => deviceFor(g));
    const r = findMaxBatch(plan, { device: planGpu(plan), catalog });
    expect(r.max_batch).toBe(0);
    const on = new Set(r.needed!.fits_on.map((g) => g.id));
    // bf16 weights, gradients and two AdamW states: 4 x 16 GB; fits 80 GB and larger GPUs, not 24-48 GB ones
    expect(on.has('h100-sxm')).toBe(true);
    expect(on.has('h200')).toBe(true);
    for (const small of ['rtx-4090', 'l40s', 'a100-40gb', 'rtx-a6000']) expect(on.has(small)).toBe(false);
    for (const g of r.needed!.fits_on) expect(g.available_bytes).toBeGreaterThan(r.needed!.peak_reserved_bytes! * 0.9);
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
    // what it needs (issue 10): the same plan with no cap on unbounded memory, which runs to its end
    expect(r.needed_bytes).toBeGreaterThan(r.gpu.cap_bytes);
    const free = simulate(plan, { device: { ...planGpu(plan), total_memory_bytes: 2 ** 46 }, timelinePoints: 0 });
    expect(free.oom).toBeNull();
    expect(r.needed_bytes).toBe(free.peak_reserved_bytes);
  });

  it('says that a plan needs more than the unbounded GPU when it runs out even there, instead of the peak it reached', () => {
    const huge = { ...mlp(2 ** 30), training: { ...mlp(2 ** 30).training, batch_size: 2 ** 40 } };
    const r = simulate(huge, { device: planGpu(huge), timelinePoints: 0 });
    expect(r.fits).toBe(false);
    expect(r.needed_bytes).toBeNull();
    expect(r.notes).toContainEqual({ id: 'needs_more_than_simulated', bytes: 2 ** 46 });
    expect(noteText({ id: 'needs_more_than_simulated', bytes: 2 ** 46 })).toBe('It runs out of memory even with no cap on a GPU of 65536.00 GiB, the most memplan simulates: it needs more than that.');
    expect(simulateResultSchema.parse(r).needed_bytes).toBeNull();
  });

  it('max-batch: what a plan that fits nowhere needs, when batch 1 runs out even on the unbounded GPU', () => {
    // two 2^21 x 2^21 linears: 8.8 x 10^12 fp32 parameters with AdamW's state need about 140 TB, past 64 TiB
    const plan = parsePlan({
      format: 'memplan.plan',
      version: 1,
      model: { input_features: 2 ** 21, layers: [{ type: 'linear', in_features: 2 ** 21, out_features: 2 ** 21 }, { type: 'linear', in_features: 2 ** 21, out_features: 2 ** 21 }] },
      training: { batch_size: 1, precision: 'fp32', optimizer: 'adamw' },
      gpu: { memory_limit_bytes: 2 ** 40 },
    });
    const r = findMaxBatch(plan, { device: planGpu(plan) });
    expect(r.max_batch).toBe(0);
    expect(r.needed).toEqual({ peak_reserved_bytes: null, peak_allocated_bytes: null, more_than_bytes: 2 ** 46, fits_on: [] });
    expect(maxBatchResultSchema.parse(r).needed?.more_than_bytes).toBe(2 ** 46);
    expect(neededText(r.needed!, (n) => `${n / 2 ** 40} TiB`)).toBe('Batch 1 runs out of memory even with no cap on a GPU of 64 TiB, the most memplan simulates: it needs more than that, and it fits on no GPU of the catalog.');
  });

  it('says nothing of what a plan needs when it fits', () => {
    const plan = mlp(2 ** 30);
    expect(simulate(plan, { device: planGpu(plan), timelinePoints: 0 }).needed_bytes).toBeNull();
  });
});
