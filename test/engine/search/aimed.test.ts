/**
 * Advice's searches of a plan's variants start from the plan's own search (Note [Aimed searches]): they find the
 * answer the doubling search finds, where fit is not monotonic too, in fewer trials.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { planGpu } from '../../../cli/gpus.ts';
import { findMaxBatch, parsePlan, planVariants, simulate } from '../../../engine/index.ts';
import { bytesPerSample, largestBatch } from '../../../engine/search/max-batch.ts';

const mlp = parsePlan(JSON.parse(readFileSync(new URL('../../../examples/mlp-fp16.plan.json', import.meta.url), 'utf8')));
const gpt2 = parsePlan({ format: 'memplan.plan', version: 1, model: { preset: 'gpt2' }, training: { batch_size: 4, seq_len: 1024, precision: 'amp_bf16', optimizer: 'adamw' }, gpu: { memory_limit_bytes: 12 * 2 ** 30 } });

describe('aimed searches', () => {
  it.each([
    ['the MLP example', mlp],
    ['GPT-2 under 12 GiB', gpt2],
  ])('find the largest batch of every variant of %s as the doubling search does, in fewer trials', (_name, plan) => {
    const device = planGpu(plan);
    const search = findMaxBatch(plan, { device });
    const start = { batch: search.max_batch, bytesPerSample: bytesPerSample(search.trials) };
    const at = { ...plan, training: { ...plan.training, batch_size: search.max_batch } };
    let aimedTrials = 0;
    let doublingTrials = 0;
    for (const v of planVariants(at, { microBatch: search.max_batch, goal: 'batch' }).variants) {
      const doubling = largestBatch(v.plan, { device });
      const aimed = largestBatch(v.plan, { device }, start);
      expect(aimed.max_batch, v.id).toBe(doubling.max_batch);
      // the answer and the next batch are simulated, as in the doubling search
      expect(aimed.trials.find((t) => t.batch === aimed.max_batch)?.fits, v.id).toBe(true);
      expect(aimed.trials.find((t) => t.batch === aimed.max_batch + 1)?.fits, v.id).toBe(false);
      aimedTrials += aimed.trials.length;
      doublingTrials += doubling.trials.length;
    }
    expect(aimedTrials).toBeLessThan(doublingTrials);
  });

  it('from a start that runs out, tries kMonotonicGap below it next and answers as the doubling search (MLP example, started 5% above its answer)', () => {
    const device = planGpu(mlp);
    const search = findMaxBatch(mlp, { device });
    const startBatch = Math.floor(search.max_batch * 1.05);
    const aimed = largestBatch(mlp, { device }, { batch: startBatch, bytesPerSample: bytesPerSample(search.trials) });
    expect(aimed.max_batch).toBe(search.max_batch);
    expect(aimed.trials.slice(0, 2).map((t) => [t.batch, t.fits])).toEqual([
      [startBatch, false],
      [Math.floor(startBatch * 0.9), true],
    ]);
    expect(aimed.trials.length).toBeLessThan(search.trials.length);
  });

  it('answers as the doubling search where fit is not monotonic far above the plan (MLP with expandable segments: fits at 648,609 and again at 648,628)', () => {
    const device = planGpu(mlp);
    const search = findMaxBatch(mlp, { device });
    expect(search.max_batch).toBe(612096);
    const variant = { ...mlp, training: { ...mlp.training, batch_size: 612096 }, allocator: { conf: 'expandable_segments:True' } };
    const aimed = largestBatch(variant, { device }, { batch: 612096, bytesPerSample: bytesPerSample(search.trials) });
    expect(aimed.max_batch).toBe(648609);
    const fits = (batch: number) => simulate({ ...variant, training: { ...variant.training, batch_size: batch } }, { device, timelinePoints: 0, peakDetails: false }).oom === null;
    expect([648610, 648628].map(fits)).toEqual([false, true]);
  });
});
