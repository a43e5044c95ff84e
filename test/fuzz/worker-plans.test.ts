/**
 * Generated and mutated plans, layer lists and config.json files through the worker host (createEngineHost, as
 * the app's worker runs it): every request ends in a result of the schema with finite numbers, or a clear error
 * (invalid_plan at a field, or a non-internal error), in bounded time. Each test prints how many inputs it tried.
 */
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import catalog from '../../resources/gpus.json' with { type: 'json' };
import { createEngineHost, engineAnswerSchema, maybeGunzip, safeParseHfConfig, type EngineAnswer } from '../../engine/index.ts';
import { Outcomes, expectClearEnding, hfConfig, layerListModel, mutate, mutation, plan } from './inputs.ts';

const convTableData: unknown = JSON.parse(new TextDecoder().decode(maybeGunzip(readFileSync(new URL('../../resources/cudnn-workspaces-h100.json.gz', import.meta.url)))));
const host = createEngineHost({ catalog, convTable: async () => convTableData, timelinePoints: 200 });
/** No one input may take longer than this (the limits keep the largest accepted plan near 10 s; these are small). */
const MAX_MS_PER_INPUT = 10_000;
const SEED = Number(process.env.FUZZ_SEED ?? 12);

let nextId = 1;
async function request(kind: 'simulate' | 'max_batch', planValue: unknown, outcomes: Outcomes): Promise<void> {
  const answers: EngineAnswer[] = [];
  const t0 = performance.now();
  await host.handle({ kind, id: nextId++, plan: planValue }, (a) => {
    const checked = engineAnswerSchema.safeParse(structuredClone(a));
    if (!checked.success) throw new Error(`answer off the protocol for ${JSON.stringify(planValue).slice(0, 400)}: ${checked.error.issues[0]?.message}`);
    answers.push(a);
  });
  const ms = performance.now() - t0;
  expect(ms, `took ${Math.round(ms)} ms: ${JSON.stringify(planValue).slice(0, 400)}`).toBeLessThan(MAX_MS_PER_INPUT);
  outcomes.add(expectClearEnding(answers, planValue), ms);
}

describe('fuzz: the worker host', () => {
  it('generated plans simulate or are refused clearly', async () => {
    const outcomes = new Outcomes();
    const t0 = performance.now();
    await fc.assert(fc.asyncProperty(plan, (p) => request('simulate', p, outcomes)), { numRuns: 300, seed: SEED });
    console.log(`worker simulate, generated plans: ${outcomes} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    expect(outcomes.counts.get('simulate_result') ?? 0).toBeGreaterThan(75); // the generator makes mostly valid plans
  });

  it('mutated plans simulate or are refused clearly', async () => {
    const outcomes = new Outcomes();
    const t0 = performance.now();
    await fc.assert(fc.asyncProperty(plan, fc.array(mutation, { minLength: 1, maxLength: 3 }), (p, ms) => request('simulate', mutate(p, ms), outcomes)), { numRuns: 900, seed: SEED });
    console.log(`worker simulate, mutated plans: ${outcomes} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    expect(outcomes.counts.get('invalid_plan') ?? 0).toBeGreaterThan(200);
  });

  it('mutated layer lists simulate or are refused clearly', async () => {
    const outcomes = new Outcomes();
    const t0 = performance.now();
    const layerPlan = fc.tuple(layerListModel, fc.array(mutation, { maxLength: 2 })).map(([model, ms]) => ({ format: 'memplan.plan', version: 1, model: mutate(model, ms), training: { batch_size: 4 } }));
    await fc.assert(fc.asyncProperty(layerPlan, (p) => request('simulate', p, outcomes)), { numRuns: 700, seed: SEED });
    console.log(`worker simulate, layer lists: ${outcomes} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  });

  it('mutated config.json files: the paste box and the simulation agree, clearly', async () => {
    const outcomes = new Outcomes();
    const t0 = performance.now();
    let pasted = 0;
    await fc.assert(
      fc.asyncProperty(hfConfig, fc.array(mutation, { maxLength: 3 }), async (config, ms) => {
        const mutated = mutate(config, ms);
        const paste = safeParseHfConfig(mutated); // the model editor's paste box: never throws
        pasted++;
        if (!paste.ok) for (const i of paste.issues) expect(i.path).toMatch(/^model\.hf_config/);
        await request('simulate', { format: 'memplan.plan', version: 1, model: { hf_config: mutated }, training: { batch_size: 2, seq_len: 32 } }, outcomes);
      }),
      { numRuns: 600, seed: SEED },
    );
    console.log(`worker simulate, config.json: ${pasted} pasted, ${outcomes} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  });

  it('max-batch searches of generated plans end in a result or a clear error', async () => {
    const outcomes = new Outcomes();
    const t0 = performance.now();
    const small = plan.filter((p) => 'layers' in p.model || 'hf_config' in p.model);
    await fc.assert(fc.asyncProperty(small, fc.array(mutation, { maxLength: 1 }), (p, ms) => request('max_batch', mutate(p, ms), outcomes)), { numRuns: 40, seed: SEED });
    console.log(`worker max_batch: ${outcomes} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  });
});
