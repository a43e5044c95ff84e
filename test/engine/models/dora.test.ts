/**
 * DoRA (`training.lora.use_dora`, PEFT 0.21's DoraLinearVariant) against what PEFT built on the GPU machine
 * (test/fixtures/device/h100_dora.json: named_parameters() with DoRA's magnitude vectors) and what the H100 ran:
 * two recordings exact event for event (test/engine/train/calibration.test.ts: TinyLlama in bf16 with a dropout,
 * so the base output is computed again; a Llama 3.2 shape in AMP bf16 with checkpointing and no dropout, whose
 * recomputation stops inside a DoRA layer) and two boundary searches at published sizes (test/fixtures/boundary-suite).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { InputError } from '../../../engine/errors.ts';
import { parsePlan } from '../../../engine/plan/parse.ts';
import { planModel, simulate } from '../../../engine/train/simulate.ts';
import { planGpu } from '../../../cli/gpus.ts';

interface ProbeCase {
  name: string;
  plan: { model: unknown; training: Record<string, unknown> & { lora: Record<string, unknown> } };
  parameters: [string, number[], string, boolean][];
}
const probe = JSON.parse(readFileSync(new URL('../../fixtures/device/h100_dora.json', import.meta.url), 'utf8')) as { versions: Record<string, string>; cases: ProbeCase[] };
const unwrapped = (name: string) => name.replace(/^base_model\.model\./, '').replace('.base_layer.', '.');

describe("DoRA's parameters are PEFT's: the magnitude vector after lora_B, fp32, trained", () => {
  it('was probed with PEFT 0.21', () => {
    expect(probe.versions.peft).toBe('0.21.0');
    expect(probe.cases.map((c) => c.name)).toEqual(['dora_tinyllama_4l_bf16_qv_s512', 'dora_llama32_4l_amp_bf16_all_linear_ckpt_s512', 'dora_gpt2_small_amp_bf16_c_attn_s512']);
  });
  for (const c of probe.cases.filter((x) => !x.name.includes('gpt2'))) {
    it(c.name, () => {
      const plan = parsePlan(c.plan);
      const model = planModel(plan, planGpu(plan));
      const mine = model.parameters.filter((p) => !p.buffer).map((p) => [p.name, p.shape, p.dtype, !p.frozen]);
      expect(mine).toEqual(c.parameters.map(([name, shape, dtype, trains]) => [unwrapped(name), shape, dtype, trains]));
    });
  }
});

describe('simulated', () => {
  const tiny = probe.cases[0]!;
  const run = (lora: Record<string, unknown>) => {
    const plan = parsePlan({ ...tiny.plan, training: { ...tiny.plan.training, batch_size: 1, seq_len: 128, lora: { ...tiny.plan.training.lora, ...lora } } });
    return simulate(plan, { device: planGpu(plan), timelinePoints: 0 });
  };

  it('costs more than LoRA: the adapter product and the base weight in fp32 at every adapted layer, the weight norm, the DoRA terms', () => {
    const dora = run({});
    const lora = run({ use_dora: false });
    // the magnitude vectors: one value per output feature of each adapted module (q_proj 2048, v_proj 256, 4 layers)
    expect(dora.model.trainable_parameter_count! - lora.model.trainable_parameter_count!).toBe(4 * (2048 + 256));
    // at least q_proj's fp32 [2048, 2048] product and its fp32 copy of the weight live together in a forward
    expect(dora.peak_allocated_bytes - lora.peak_allocated_bytes).toBeGreaterThan(2 * 2048 * 2048 * 4);
  });

  it("is refused on GPT-2's Conv1D, where PEFT wraps the base weight in a new Parameter at every forward (measured)", () => {
    const gpt2 = probe.cases.find((c) => c.name.includes('gpt2'))!;
    const plan = parsePlan(gpt2.plan);
    let error: unknown = null;
    try {
      planModel(plan, planGpu(plan));
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(InputError);
    expect((error as InputError).where).toBe('training.lora.use_dora');
    expect((error as InputError).problem).toMatch(/^DoRA on GPT-2's Conv1D layers is not simulated yet: PEFT 0\.21's transpose\(weight, fan_in_fan_out\) wraps an fp32 base weight in a new nn\.Parameter/);
  });
});
