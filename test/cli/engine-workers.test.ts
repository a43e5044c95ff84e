/**
 * The CLI's worker threads (cli/engine-workers.ts) give what one thread gives: `max-batch`'s search with trials
 * simulated ahead (Note [Searching on every core]), its advice, and `--gpu all`'s searches, field for field,
 * whatever the number of workers.
 */
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { describe, expect, it } from 'vitest';
import { EngineWorkers, defaultWorkers } from '../../cli/engine-workers.ts';
import { planGpu } from '../../cli/gpus.ts';
import { InputError, advise, findMaxBatch, parsePlan, type Plan } from '../../engine/index.ts';
import { portableDevice } from '../../cli/engine-worker.ts';

const example = (name: string, gpu: Plan['gpu']): Plan => parsePlan({ ...JSON.parse(readFileSync(new URL(`../../examples/${name}`, import.meta.url), 'utf8')), gpu });

// Two plans whose variants differ in kind: a layer list (fused optimizer already set: accumulation, expandable
// segments, checkpointing) and GPT-2 from its config.json (LoRA not simulated: a reason known before any variant).
const plans = [example('mlp-fp16.plan.json', { memory_limit_bytes: 2 * 2 ** 30 }), example('gpt2-config-json.plan.json', { memory_limit_bytes: 6 * 2 ** 30 })];

async function withWorkers<T>(count: number, use: (workers: EngineWorkers) => Promise<T>): Promise<T> {
  const workers = new EngineWorkers(count, { worthWorkersMs: 0 }); // threads even for these short searches
  try {
    return await use(workers);
  } finally {
    await workers.close();
  }
}

describe('worker threads give what one thread gives', () => {
  for (const plan of plans) {
    it(`${plan.name}: the search and its advice from 3, 2 and no workers`, async () => {
      const device = planGpu(plan);
      const search = findMaxBatch(plan, { device });
      const expected = advise(plan, { device, goal: 'batch', maxBatch: search });
      expect(expected.advice.length + expected.not_applicable.length).toBeGreaterThanOrEqual(5);
      for (const count of [3, 2, 0]) {
        await withWorkers(count, async (workers) => {
          const r = await workers.maxBatch(plan, { device });
          expect(r, `${count} workers`).toEqual(search); // trials in the same order, the same answer and details
          // with workers (and a core to spare for them), the search used trials they simulated ahead
          if (count > 0 && availableParallelism() > 1) expect(workers.lastSearch.aheadUsed, `${count} workers`).toBeGreaterThan(0);
          expect(workers.lastSearch.onThisThread + workers.lastSearch.aheadUsed).toBeGreaterThanOrEqual(search.trials.length);
          expect(await workers.advise(plan, { device, goal: 'batch', maxBatch: r }), `${count} workers`).toEqual(expected);
        });
      }
    }, 180_000);
  }

  it('--gpu all: one search per GPU, each as findMaxBatch', async () => {
    const plan = plans[1]!;
    const searches = ['h100-sxm', 'a100-40gb', 'l4'].map((name) => {
      const p: Plan = { ...plan, gpu: { name } };
      return { plan: p, options: { device: planGpu(p) } };
    });
    const expected = searches.map(({ plan, options }) => findMaxBatch(plan, options));
    expect(await withWorkers(2, (w) => w.maxBatchEach(searches))).toEqual(expected);
    // a search the engine refuses gives its InputError, in its place, and the others their results
    const qlora = parsePlan({ format: 'memplan.plan', version: 1, model: { preset: 'tinyllama-1.1b' }, training: { batch_size: 1, seq_len: 128, precision: 'bf16', lora: { r: 8, alpha: 16, target_modules: ['q_proj'], quantization: '4bit' } } });
    const mixed = [searches[0]!, { plan: qlora, options: { device: planGpu(qlora) } }];
    for (const threads of [1, 2]) {
      const [found, refused] = await withWorkers(threads, (w) => w.maxBatchEach(mixed));
      expect(found, `${threads} threads`).toEqual(expected[0]);
      expect(refused, `${threads} threads`).toBeInstanceOf(InputError);
      expect((refused as InputError).where).toBe('training.lora.quantization');
    }
  }, 180_000);

  it("a worker's error comes back as what it is: bad input as an InputError at its field, else with its stack", async () => {
    const plan = plans[0]!;
    const device = planGpu(plan);
    const options = { device: { ...portableDevice(device) } };
    await withWorkers(2, async (workers) => {
      workers.start();
      // QLoRA: the engine refuses it at training.lora.quantization
      const qlora = parsePlan({ format: 'memplan.plan', version: 1, model: { preset: 'tinyllama-1.1b' }, training: { batch_size: 1, seq_len: 128, precision: 'bf16', lora: { r: 8, alpha: 16, target_modules: ['q_proj'], quantization: '4bit' } } });
      const refused = await workers.run({ kind: 'trial', plan: qlora, batch: 1, options }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(InputError);
      expect((refused as InputError).where).toBe('training.lora.quantization');
      // a model no preset has (parsePlan would refuse it): a TypeError inside the engine
      const broken = { ...plan, model: { preset: 'no-such-preset' } } as Plan;
      const failed = await workers.run({ kind: 'trial', plan: broken, batch: 1, options }).catch((e: unknown) => e);
      expect(failed).toBeInstanceOf(Error);
      expect(String(failed)).toMatch(/worker thread: Cannot read properties of undefined/);
      expect(String((failed as Error).cause)).toMatch(/TypeError/);
      // the workers are still there and answer
      expect(workers.size).toBe(2);
      expect((await workers.run({ kind: 'trial', plan, batch: 1, options })).fits).toBe(true);
    });
  });

  it('a worker that dies fails its job, the others go on, and the search is the same', async () => {
    const plan = plans[1]!;
    const device = planGpu(plan);
    await withWorkers(2, async (workers) => {
      workers.start();
      expect(workers.size).toBe(2);
      // kill one: its 'exit' removes it
      await (workers as unknown as { workers: import('node:worker_threads').Worker[] }).workers[0]!.terminate();
      await expect.poll(() => workers.size).toBe(1);
      expect(await workers.maxBatch(plan, { device })).toEqual(findMaxBatch(plan, { device }));
    });
  }, 120_000);
});

describe('when a search starts its workers', () => {
  it('not for a search whose second trial is shorter than the threshold: the main thread does it all', async () => {
    const plan = plans[1]!;
    const device = planGpu(plan);
    const workers = new EngineWorkers(2, { worthWorkersMs: Number.POSITIVE_INFINITY });
    try {
      expect(await workers.maxBatch(plan, { device })).toEqual(findMaxBatch(plan, { device }));
      expect(workers.size).toBe(0);
      expect(workers.lastSearch.aheadUsed).toBe(0);
    } finally {
      await workers.close();
    }
  }, 60_000);
});

describe('workers by default', () => {
  it('none below 4 cores (no gain measured on 2), one core fewer than the machine above, at most 4', () => {
    expect([1, 2, 3, 4, 6, 16, 128].map((cores) => defaultWorkers(cores))).toEqual([0, 0, 0, 3, 4, 4, 4]);
  });
});
