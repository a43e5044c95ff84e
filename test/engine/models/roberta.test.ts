/**
 * RoBERTa and XLM-RoBERTa as transformers 5.17 trains them (engine/models/hf/bert.ts): BERT's encoder under
 * `roberta`, position ids counted from the padding token, RobertaLMHead (masked LM) and RobertaClassificationHead
 * (sequence classifier), XLM-RoBERTa's head registered before `roberta`. test/engine/train/calibration.test.ts
 * compares the H100 recordings (roberta_*, xlm_roberta_*, lora_xlm_roberta_*) event by event.
 */
import { describe, expect, it } from 'vitest';
import { resolveHfConfig } from '../../../engine/models/hf/config.ts';
import { parsePlan } from '../../../engine/plan/parse.ts';
import { simulate } from '../../../engine/train/simulate.ts';
import { planGpu } from '../../../cli/gpus.ts';
import { PRESETS } from '../../../engine/models/presets.ts';
import { allocationsOf, expectAsRecorded, recording } from './allocations.ts';

const planOf = (preset: string, training: Record<string, unknown> = {}) =>
  parsePlan({ format: 'memplan.plan', version: 1, model: { preset }, training: { batch_size: 2, seq_len: 16, precision: 'bf16', optimizer: 'adamw', steps: 1, ...training } });

describe('RoBERTa and XLM-RoBERTa recorded on the H100', () => {
  it.each([
    ['roberta_base_amp_bf16_adamw', 0],
    ['roberta_base_cls_bf16_adamw', 0],
    ['lora_xlm_roberta_base_cls_amp_bf16_qvd_ckpt', 0],
    // the same allocations and frees in the same order (to the teardown); a block's rounded size where it lands
    // leaves the peak allocated 512 KiB under (0.006%); reserved exact
    ['xlm_roberta_base_fp32_ckpt_sgdm', 0.0001],
  ])("%s: the recording's parameter count, what trains under LoRA, and its peaks", (name, allocatedError) => {
    expectAsRecorded(name, allocatedError);
  });

  it('the presets have the recordings’ counts: roberta-base 124,697,433 and xlm-roberta-base 278,295,186 (masked LM)', () => {
    const count = (preset: string) => simulate(planOf(preset), { device: planGpu(planOf(preset)), untilSteady: false, timelinePoints: 0, peakDetails: false }).model.parameter_count;
    expect(count('roberta-base')).toBe(recording('roberta_base_amp_bf16_adamw').model.parameter_count);
    expect(count('xlm-roberta-base')).toBe(recording('xlm_roberta_base_fp32_ckpt_sgdm').model.parameter_count);
  });
});

describe('RoBERTa’s embeddings and heads', () => {
  it('position ids from the input ids: six [B, T] steps, the int32 mask and `incremental_indices` alive to the end', () => {
    const all = allocationsOf(planOf('roberta-base'));
    const steps = all.filter((a) => a.label.startsWith('position ids: ')).slice(0, 9);
    expect(steps.map((a) => [a.label.slice('position ids: '.length), a.size])).toEqual([
      ['input_ids.ne(padding_idx)', 32],
      ['mask (.int())', 128],
      ['cumsum(mask)', 256],
      ['cumsum(mask): mask as int64', 256],
      ['.type_as(mask)', 128],
      ['+ past_key_values_length', 128],
      ['* mask', 128],
      ['.long()', 256],
      ['+ padding_idx', 256],
    ]);
    const [, mask, , , , , incremental, long, positions] = steps;
    expect(mask!.free).toBeGreaterThan(positions!.alloc);
    expect(incremental!.free).toBeGreaterThan(positions!.alloc);
    expect(long!.free).toBeGreaterThan(positions!.alloc);
  });

  it('512 tokens fit its 514 positions (they start after the padding token); 513 are refused', () => {
    expect(() => simulate(planOf('roberta-base', { seq_len: 512 }), { device: planGpu(planOf('roberta-base')), untilSteady: false, timelinePoints: 0, peakDetails: false })).not.toThrow();
    expect(() => simulate(planOf('roberta-base', { seq_len: 513 }), { device: planGpu(planOf('roberta-base')), untilSteady: false, timelinePoints: 0, peakDetails: false })).toThrow(/^training\.seq_len: 513 is more than the model's 512 positions$/);
  });

  it('XLM-RoBERTa moves its head first: the masked LM’s dense, then the tied word embedding with the decoder', () => {
    const labels = allocationsOf(planOf('xlm-roberta-base')).map((a) => a.label);
    // named_parameters() meets the tied word embedding first as the decoder's weight (h100_lora_targets.json)
    expect(labels.slice(0, 6)).toEqual(['lm_head.dense.weight', 'lm_head.dense.bias', 'lm_head.layer_norm.weight', 'lm_head.layer_norm.bias', 'lm_head.decoder.weight', 'lm_head.bias']);
    const rob = allocationsOf(planOf('roberta-base')).map((a) => a.label);
    expect(rob[0]).toBe('roberta.embeddings.word_embeddings.weight');
  });

  it('the classification head: the first token, dropout, dense, tanh, dropout, out_proj; PEFT’s copy trains under LoRA', () => {
    const hf = { ...resolveRaw('roberta-base'), architectures: ['RobertaForSequenceClassification'], num_labels: 3 };
    const plan = parsePlan({ format: 'memplan.plan', version: 1, model: { hf_config: hf }, training: { batch_size: 2, seq_len: 16, precision: 'bf16', optimizer: 'adamw', steps: 1, lora: { r: 4, alpha: 8, target_modules: ['query', 'value', 'dense'] } } });
    const labels = new Set(allocationsOf(plan).map((a) => a.label));
    expect(labels.has('classifier.out_proj')).toBe(true);
    expect(labels.has('classifier.modules_to_save.default.dense.weight exp_avg')).toBe(true);
    // a `dense` target adapts the encoder's, not the head's (measured: PEFT adapts no module inside modules_to_save)
    expect([...labels].some((l) => l.startsWith('classifier.dense.lora_A'))).toBe(false);
    expect(labels.has('roberta.encoder.layer.0.intermediate.dense.lora_A.default.weight exp_avg')).toBe(true);
    expect(resolveHfConfig(hf).family).toBe('bert');
  });
});

/** A preset's config.json. */
function resolveRaw(preset: string): Record<string, unknown> {
  const p = PRESETS[preset]!;
  if (p.kind !== 'hf') throw new Error(`${preset} is not a Hugging Face preset`);
  return { ...(p.config as Record<string, unknown>) };
}
