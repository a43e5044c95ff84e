/**
 * BertForSequenceClassification as transformers 5.17 trains it (engine/models/hf/config.ts `sequenceClassification`,
 * bert.ts): BertModel with its pooler (`dense(hidden_states[:, 0])`, tanh), dropout, the classifier, and
 * its loss (by default CrossEntropyLoss on one class id per sequence; problem_type regression and
 * multi_label_classification: MSELoss and BCEWithLogitsLoss on float32 labels); under LoRA, PEFT's SEQ_CLS task keeps a trainable copy of the
 * classifier (`modules_to_save`). test/engine/train/calibration.test.ts compares the H100 recordings (bert_*_cls_*,
 * lora_bert_*_cls_*) event by event.
 */
import { describe, expect, it } from 'vitest';
import { resolveHfConfig } from '../../../engine/models/hf/config.ts';
import { parsePlan } from '../../../engine/plan/parse.ts';
import { simulate } from '../../../engine/train/simulate.ts';
import { advise } from '../../../engine/search/advice.ts';
import { planGpu } from '../../../cli/gpus.ts';
import { allocationsOf, expectAsRecorded, recording, planOf, smallBert } from './allocations.ts';

const small = (extra: Record<string, unknown> = {}) => smallBert('BertForSequenceClassification', extra);

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
    expect(head({})).toEqual({ kind: 'sequence_classification', numLabels: 2, problem: 'single_label_classification', dropout: 0.1 });
    expect(head({ id2label: { 0: 'neg', 1: 'neutral', 2: 'pos' } })).toMatchObject({ numLabels: 3 });
    expect(head({ id2label: { 0: 'neg', 1: 'neutral', 2: 'pos' }, num_labels: 5 })).toMatchObject({ numLabels: 5 });
    expect(() => head({ id2label: {} })).toThrow(/^model\.hf_config\.id2label: names no class: a classifier needs at least one$/);
    expect(head({ id2label: { 0: 'score' } })).toMatchObject({ numLabels: 1, problem: 'regression' });
    expect(head({ num_labels: 7, hidden_dropout_prob: 0.2 })).toEqual({ kind: 'sequence_classification', numLabels: 7, problem: 'single_label_classification', dropout: 0.2 });
    expect(head({ classifier_dropout: 0 })).toMatchObject({ dropout: 0 });
    expect(head({ architectures: ['BertForMaskedLM'] })).toEqual({ kind: 'masked_lm' });
    expect(head({ architectures: undefined })).toEqual({ kind: 'masked_lm' });
  });

  it('problem_type as given, else regression for one label and single-label classification for more (transformers 5.17 refuses other values)', () => {
    expect(head({ num_labels: 1 })).toMatchObject({ numLabels: 1, problem: 'regression' });
    expect(head({ num_labels: 3, problem_type: 'regression' })).toMatchObject({ numLabels: 3, problem: 'regression' });
    expect(head({ num_labels: 6, problem_type: 'multi_label_classification' })).toMatchObject({ numLabels: 6, problem: 'multi_label_classification' });
    expect(head({ problem_type: null })).toMatchObject({ problem: 'single_label_classification' });
    // measured: BertConfig(problem_type="mult") raises StrictDataclassFieldValidationError in transformers 5.17
    expect(() => head({ problem_type: 'mult' })).toThrow(/^model\.hf_config\.problem_type: must be one of "regression", "single_label_classification", "multi_label_classification" \(or null\), got "mult"/);
    // a masked LM's config is checked too (PretrainedConfig checks the field for every model)
    expect(() => head({ architectures: ['BertForMaskedLM'], problem_type: 'mult' })).toThrow(/^model\.hf_config\.problem_type: must be one of/);
    // what transformers runs: cross-entropy over one class (a loss of 0), multi-label on one label
    expect(head({ num_labels: 1, problem_type: 'single_label_classification' })).toMatchObject({ numLabels: 1, problem: 'single_label_classification' });
    expect(head({ num_labels: 1, problem_type: 'multi_label_classification' })).toMatchObject({ numLabels: 1, problem: 'multi_label_classification' });
  });

  it('labels as a DataCollator gives them: class ids, a float32 score per sequence, float32 per label', () => {
    const labels = (extra: Record<string, unknown>) => allocationsOf(planOf(small(extra), { precision: 'fp32' })).find((a) => a.label === 'labels')!.size;
    expect(labels({})).toBe(4 * 8); // int64 [B]
    expect(labels({ num_labels: 1 })).toBe(4 * 4); // float32 [B]
    expect(labels({ num_labels: 3, problem_type: 'regression' })).toBe(4 * 3 * 4); // float32 [B, 3]
    expect(labels({ num_labels: 6, problem_type: 'multi_label_classification' })).toBe(4 * 6 * 4); // float32 [B, 6]
    expect(labels({ num_labels: 1, problem_type: 'multi_label_classification' })).toBe(4 * 4); // float32 [B, 1]
    expect(labels({ num_labels: 1, problem_type: 'single_label_classification' })).toBe(4 * 8); // int64 [B]
  });

  it('MSELoss keeps the elementwise storage under its scalar loss; BCEWithLogitsLoss a new scalar in the labels’ dtype', () => {
    const mse = allocationsOf(planOf(small({ num_labels: 1 }), { precision: 'amp_bf16' }));
    // under autocast the squeezed bf16 logits are cast to fp32 (mse_loss is on the fp32 list), then [B] fp32 twice
    expect(mse.find((a) => a.label === 'mse_loss input (autocast to float32)')!.size).toBe(4 * 4);
    const loss = mse.find((a) => a.label === 'loss')!;
    expect(loss.size).toBe(4 * 4);
    const squared = mse.find((a) => a.label === 'mse_loss squared errors')!;
    expect(squared.alloc).toBeGreaterThan(loss.alloc);
    expect(squared.free).toBeLessThan(mse.find((a) => a.label === 'grad of mse_loss')!.alloc);
    const bce = allocationsOf(planOf(small({ num_labels: 6, problem_type: 'multi_label_classification' })));
    // bf16 logits against float32 labels: log_sigmoid in bf16, the elementwise loss and its mean in float32
    expect(bce.find((a) => a.label === 'log_sigmoid(input)')!.size).toBe(4 * 6 * 2);
    expect(bce.find((a) => a.label === '(1 - target) * input - log_sigmoid(input)')!.size).toBe(4 * 6 * 4);
    expect(bce.find((a) => a.label === 'loss')!.size).toBe(4);
    expect(bce.find((a) => a.label === 'grad of binary_cross_entropy_with_logits')!.size).toBe(4 * 6 * 2);
    // fp32: MSELoss saves the squeezed logits themselves (no cast); one sequence squeezes [1, 1] to a scalar
    for (const batch of [4, 1]) {
      const fp32 = allocationsOf(planOf(small({ num_labels: 1 }), { precision: 'fp32', batch_size: batch }));
      const logits = fp32.find((a) => a.label === 'classifier')!;
      expect(logits.size).toBe(batch * 4);
      expect(fp32.find((a) => a.label === 'loss')!.size).toBe(batch * 4);
      expect(logits.free).toBeGreaterThan(fp32.find((a) => a.label === 'grad of mse_loss')!.alloc);
      expect(fp32.some((a) => a.label.includes('autocast'))).toBe(false);
    }
  });

  it('a regression on a bf16 or fp16 model is refused at training.precision, as PyTorch fails it (measured), and advice does not offer bf16 weights for one', () => {
    // measured on the H100 (PyTorch 2.11, transformers 5.17): BERT and Llama with num_labels 1, float32 labels
    expect(() => planOf(small({ num_labels: 1 }), { precision: 'bf16' })).toThrow(/^training\.precision: .*"Found dtype Float but expected BFloat16"; train in amp_bf16 or fp32/);
    expect(() => planOf(small({ num_labels: 1 }), { precision: 'fp16' })).toThrow(/"Found dtype Float but expected Half"; train in amp_fp16 or fp32/);
    expect(() => planOf(small({ num_labels: 1 }), { precision: 'bf16', lora: { r: 4, alpha: 8, target_modules: ['query', 'value'] } })).toThrow(/^training\.precision: /);
    for (const precision of ['amp_bf16', 'amp_fp16', 'fp32']) expect(planOf(small({ num_labels: 1 }), { precision }).training.precision).toBe(precision);
    expect(planOf(small({ num_labels: 6, problem_type: 'multi_label_classification' }), { precision: 'bf16' }).training.precision).toBe('bf16');
    // advice does not offer the bf16-weights variant: PyTorch fails it, with the same message
    const regression = planOf(small({ num_labels: 1 }), { precision: 'amp_bf16' });
    const bf16 = advise(regression, { device: planGpu(regression) }).not_applicable.find((n) => n.id === 'bf16_weights');
    expect(bf16).toMatchObject({ reason_id: 'fails_in_pytorch' });
    expect(bf16!.message).toMatch(/^training\.precision: a regression head \(MSELoss\) on a bfloat16 model fails in PyTorch/);
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
