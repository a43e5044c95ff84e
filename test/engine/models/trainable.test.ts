/**
 * What trains: the result's `trainable_parameter_count` (engine/train/simulate.ts `modelSummary`) against every
 * recording that counted it on the H100 (memplan_measure.py: `sum(p.numel() for p in model.parameters() if
 * p.requires_grad)` after PEFT and `training.freeze`, what PEFT's print_trainable_parameters() prints), full
 * fine-tunes, LoRA on every family, frozen parameters and classifier heads kept whole among them.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parsePlan } from '../../../engine/plan/parse.ts';
import { modelSummary, planModel } from '../../../engine/train/simulate.ts';
import { planGpu } from '../../../cli/gpus.ts';
import { recordedPlan, type Recording } from './allocations.ts';

const dir = new URL('../../fixtures/calibration/', import.meta.url);
const counted = readdirSync(dir)
  .filter((f) => f.endsWith('.json'))
  .map((f) => JSON.parse(readFileSync(new URL(f, dir), 'utf8')) as Partial<Recording> & { name: string })
  .filter((m): m is Recording & { name: string } => typeof m.model?.trainable_parameter_count === 'number');

describe('trainable parameters, as the H100 runs counted them', () => {
  it('covers full fine-tunes and partial ones', () => {
    expect(counted.length).toBeGreaterThanOrEqual(120);
    expect(counted.filter((m) => m.model.trainable_parameter_count < m.model.parameter_count).length).toBeGreaterThanOrEqual(40);
  });

  // recorded to show what memplan does not simulate yet (test/engine/models/dora.test.ts): refused, not counted
  const refused = ['dora_gpt2_small_amp_bf16_c_attn_s512'];
  for (const m of counted.filter((x) => !refused.includes(x.name))) {
    it(m.name, () => {
      const plan = parsePlan(recordedPlan(m));
      const summary = modelSummary(planModel(plan, planGpu(plan)));
      expect(summary.parameter_count).toBe(m.model.parameter_count);
      expect(summary.trainable_parameter_count).toBe(m.model.trainable_parameter_count);
    });
  }
});
