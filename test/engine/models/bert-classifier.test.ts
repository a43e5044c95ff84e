/**
 * BertForSequenceClassification as transformers 5.17 trains it (engine/models/hf/config.ts `sequenceClassification`,
 * bert.ts): BertModel with its pooler (`dense(hidden_states[:, 0])`, tanh), dropout, the classifier, and
 * CrossEntropyLoss on one class id per sequence; under LoRA, PEFT's SEQ_CLS task keeps a trainable copy of the
 * classifier (`modules_to_save`). test/engine/train/calibration.test.ts compares the H100 recordings (bert_*_cls_*,
 * lora_bert_*_cls_*) event by event.
 */
import { describe, expect, it } from 'vitest';
import { resolveHfConfig } from '../../../engine/models/hf/config.ts';
import { parsePlan } from '../../../engine/plan/parse.ts';
import { simulate } from '../../../engine/train/simulate.ts';
import { planGpu } from '../../../cli/gpus.ts';
import { allocationsOf, expectAsRecorded, recording } from './allocations.ts';

const small = (extra: Record<string, unknown> = {}) => ({
  model_type: 'bert',
  architectures: ['BertForSequenceClassification'],
  hidden_size: 64,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  intermediate_size: 128,
  vocab_size: 1000,
  ...extra,
});
const planOf = (hf: Record<string, unknown>, training: Record<string, unknown> = {}) =>
  parsePlan({ format: 'memplan.plan', version: 1, model: { hf_config: hf }, training: { batch_size: 4, seq_len: 32, precision: 'bf16', optimizer: 'adamw', steps: 1, ...training } });

describe('BERT sequence classifiers recorded on the H100', () => {
  it.each(['bert_base_cls_amp_bf16_adamw', 'bert_large_cls_fp32_ckpt_sgdm', 'lora_bert_base_cls_bf16_qv_adamw', 'lora_bert_base_cls_amp_fp16_all_reentrant'])(
    "%s: the recording's parameter count, what trains under LoRA, and both peaks to the byte",
    (name) => expectAsRecorded(name),
  );

  it('the head is tiny next to the masked LM’s: the same encoder under AMP bf16 peaks gigabytes lower', () => {
    const m = recording('bert_base_cls_amp_bf16_adamw');
    const { architectures: _a, id2label: _i, label2id: _l, ...mlm } = (m.plan.model as { hf_config: Record<string, unknown> }).hf_config;
    const plan = parsePlan({ ...m.plan, model: { hf_config: mlm } });
    const masked = simulate(plan, { device: planGpu(plan), untilSteady: false, timelinePoints: 0, peakDetails: false });
    // batch 32 x 512 tokens: the masked LM's logits over 30,522 tokens (fp32 log-softmax and its gradient) add
    // about 5 GiB to the classifier's 7.7 GiB
    expect(masked.peak_allocated_bytes - m.peak_allocated_bytes).toBeGreaterThan(4 * 2 ** 30);
  });
});

describe('the head a config.json names', () => {
  const head = (extra: Record<string, unknown>) => {
    const cfg = resolveHfConfig(small(extra));
    if (cfg.family !== 'bert') throw new Error('not bert');
    return cfg.head;
  };

  it('num_labels (transformers 5.17 lets it win, measured), else the length of id2label, else 2; classifier_dropout, else the hidden dropout', () => {
    expect(head({})).toEqual({ kind: 'sequence_classification', numLabels: 2, dropout: 0.1 });
    expect(head({ id2label: { 0: 'neg', 1: 'neutral', 2: 'pos' } })).toMatchObject({ numLabels: 3 });
    expect(head({ id2label: { 0: 'neg', 1: 'neutral', 2: 'pos' }, num_labels: 5 })).toMatchObject({ numLabels: 5 });
    expect(() => head({ id2label: {} })).toThrow(/^model\.hf_config\.id2label: names no class/);
    expect(head({ num_labels: 7, hidden_dropout_prob: 0.2 })).toEqual({ kind: 'sequence_classification', numLabels: 7, dropout: 0.2 });
    expect(head({ classifier_dropout: 0 })).toMatchObject({ dropout: 0 });
    expect(head({ architectures: ['BertForMaskedLM'] })).toEqual({ kind: 'masked_lm' });
    expect(head({ architectures: undefined })).toEqual({ kind: 'masked_lm' });
  });

  it('regression and multi-label classification are refused at their field', () => {
    expect(() => head({ num_labels: 1 })).toThrow(/^model\.hf_config\.num_labels: one label makes the problem a regression/);
    expect(() => head({ problem_type: 'multi_label_classification' })).toThrow(/^model\.hf_config\.problem_type: "multi_label_classification" is not simulated yet/);
    expect(head({ problem_type: 'single_label_classification' })).toMatchObject({ kind: 'sequence_classification' });
  });

  it('the classifier’s logits are [B, num_labels]; the pooler’s first-token view gives back a gradient of the whole hidden states', () => {
    const all = allocationsOf(planOf(small({ num_labels: 5 })));
    const logits = all.find((a) => a.label === 'classifier')!;
    expect(logits.size).toBe(4 * 5 * 2);
    const selectGrad = all.find((a) => a.label === 'grad of hidden_states[:, 0]')!;
    expect(selectGrad.size).toBe(4 * 32 * 64 * 2);
    expect(all.some((a) => a.label.startsWith('cls.predictions'))).toBe(false);
  });

  it('under LoRA the classifier trains as PEFT’s modules_to_save copy (model dtype), the pooler stays frozen', () => {
    const lora = { r: 4, alpha: 8, target_modules: ['query', 'value'] };
    const all = allocationsOf(planOf(small(), { lora }));
    const labels = new Set(all.map((a) => a.label));
    expect(labels.has('classifier.modules_to_save.default.weight exp_avg')).toBe(true);
    expect(labels.has('classifier.weight exp_avg')).toBe(false);
    expect([...labels].some((l) => l.startsWith('bert.pooler.dense.weight exp_avg'))).toBe(false);
    expect(all.find((a) => a.label === 'classifier.modules_to_save.default.weight')!.size).toBe(2 * 64 * 2); // bf16
  });

  it('a `dense` target adapts the pooler too (its name ends with .dense); freezing `classifier.*` leaves the copy training', () => {
    const dense = new Set(allocationsOf(planOf(small(), { lora: { r: 4, alpha: 8, target_modules: ['dense'] } })).map((a) => a.label));
    expect(dense.has('bert.pooler.dense.lora_A.default.weight exp_avg')).toBe(true);
    expect(dense.has('bert.encoder.layer.0.intermediate.dense.lora_A.default.weight exp_avg')).toBe(true);
    const frozen = new Set(allocationsOf(planOf(small(), { lora: { r: 4, alpha: 8, target_modules: ['query'] }, freeze: ['classifier.*'] })).map((a) => a.label));
    // PEFT copies the classifier after the freeze and its wrapper makes the copy trainable again
    expect(frozen.has('classifier.modules_to_save.default.weight exp_avg')).toBe(true);
  });
});
