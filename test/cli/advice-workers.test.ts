/**
 * `memplan max-batch` searches advice's variants in worker threads (cli/advice-workers.ts): the advice must be the
 * advice `advise` gives on one thread, field for field, whatever the number of workers.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { AdviceWorkers } from '../../cli/advice-workers.ts';
import { planGpu } from '../../cli/gpus.ts';
import { advise, findMaxBatch, parsePlan, type Plan } from '../../engine/index.ts';

const example = (name: string, gpu: Plan['gpu']): Plan => parsePlan({ ...JSON.parse(readFileSync(new URL(`../../examples/${name}`, import.meta.url), 'utf8')), gpu });

describe('advice in worker threads', () => {
  // Two plans whose variants differ in kind: a layer list (fused optimizer already set: accumulation, expandable
  // segments, checkpointing) and GPT-2 from its config.json (LoRA not simulated: a reason known before any variant).
  const plans = [example('mlp-fp16.plan.json', { memory_limit_bytes: 2 * 2 ** 30 }), example('gpt2-config-json.plan.json', { memory_limit_bytes: 6 * 2 ** 30 })];
  for (const plan of plans) {
    it(`${plan.name}: the same advice from 3 workers, 1 worker and none as from advise()`, async () => {
      const device = planGpu(plan);
      const search = findMaxBatch(plan, { device });
      const expected = advise(plan, { device, goal: 'batch', maxBatch: search });
      expect(expected.advice.length + expected.not_applicable.length).toBeGreaterThanOrEqual(5);
      for (const count of [3, 1, 0]) {
        const workers = new AdviceWorkers(count);
        try {
          expect(await workers.advise(plan, { device, goal: 'batch', maxBatch: search }), `${count} workers`).toEqual(expected);
        } finally {
          await workers.close();
        }
      }
    }, 120_000);
  }

  it("an error in a worker's simulation reaches the caller", async () => {
    const plan = plans[0]!;
    const device = planGpu(plan);
    const workers = new AdviceWorkers(2);
    try {
      // a model no preset has (parsePlan would refuse it): a TypeError inside the engine, not an InputError
      const broken = { ...plan, model: { preset: 'no-such-preset' } } as Plan;
      await expect(workers.advise(broken, { device, goal: 'memory', basePeakReservedBytes: 0, baseFits: true })).rejects.toThrow(/advice worker: TypeError/);
    } finally {
      await workers.close();
    }
  });
});
