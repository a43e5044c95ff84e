/**
 * The bf16 weights advice against the H100 (test/fixtures/device/h100_bf16_weights.json): GPT-2 XL in AMP bf16 and
 * with the advice's change (bf16 weights, no autocast), each loaded with from_pretrained and run for 4 steps in a
 * fresh process. memplan's peaks of every step, and so the memory the advice says it saves, are the measured ones.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { planGpu } from '../../../cli/gpus.ts';
import { advise, parsePlan, simulate } from '../../../engine/index.ts';

const measured = JSON.parse(readFileSync(new URL('../../fixtures/device/h100_bf16_weights.json', import.meta.url), 'utf8')) as {
  runs: { plan: string; peak_reserved_bytes: number; step_peaks: [number, number][] }[];
};
const planFile = (name: string) => parsePlan(JSON.parse(readFileSync(new URL(`../../../resources/measure/scenarios/advice/${name}.json`, import.meta.url), 'utf8')));
const run = (name: string) => measured.runs.find((r) => r.plan === name)!;

describe('bf16 weights advice, measured (GPT-2 XL on the H100)', () => {
  for (const name of ['gpt2_xl_amp_bf16_adamw', 'gpt2_xl_bf16_adamw']) {
    it(`${name}: the peaks of each of 4 steps, to the byte`, () => {
      const plan = planFile(name);
      const r = simulate({ ...plan, training: { ...plan.training, steps: 4 } }, { device: planGpu(plan), timelinePoints: 0 });
      expect(r.steps.map((s) => [s.peak_allocated_bytes, s.peak_reserved_bytes])).toEqual(run(name).step_peaks);
    });
  }

  it('the advice saves what the H100 measured between the two runs (18.61 GiB reserved)', () => {
    const plan = planFile('gpt2_xl_amp_bf16_adamw');
    const item = advise(plan, { device: planGpu(plan) }).advice.find((a) => a.id === 'bf16_weights')!;
    expect(item.saved_bytes).toBe(run('gpt2_xl_amp_bf16_adamw').peak_reserved_bytes - run('gpt2_xl_bf16_adamw').peak_reserved_bytes);
    expect(item.peak_reserved_bytes).toBe(run('gpt2_xl_bf16_adamw').peak_reserved_bytes);
  }, 30_000);
});
