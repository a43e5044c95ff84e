/**
 * Token classifiers (named-entity recognition and the like) as transformers 5.17 trains them: BertForTokenClassification,
 * RobertaForTokenClassification and XLMRobertaForTokenClassification (engine/models/hf/config.ts `resolveEncoder`,
 * bert.ts): the encoder without a pooler, dropout, the classifier on every token, CrossEntropyLoss on one class id
 * per token; under LoRA, PEFT's TOKEN_CLS task keeps a trainable copy of the classifier (`modules_to_save`).
 * test/engine/train/calibration.test.ts compares the H100 recordings (*_tok_*) event by event.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { WITHOUT_TOKEN_CLASSIFIER, resolveHfConfig } from '../../../engine/models/hf/config.ts';
import { parsePlan } from '../../../engine/plan/parse.ts';
import { simulate } from '../../../engine/train/simulate.ts';
import { advise } from '../../../engine/search/advice.ts';
import { loraConfigCode } from '../../../engine/models/peft/lora.ts';
import { planGpu } from '../../../cli/gpus.ts';
import { allocationsOf, expectAsRecorded, recording, expectSameRequestsPlacedElsewhere, planOf, smallBert } from './allocations.ts';

const small = (extra: Record<string, unknown> = {}) => smallBert('BertForTokenClassification', extra);

describe('token classifiers recorded on the H100', () => {
  it.each(['lora_roberta_base_tok_bf16_qv', 'xlm_roberta_base_tok_amp_bf16_ckpt'])("%s: the recording's parameter count, what trains under LoRA, and both peaks to the byte", (name) => {
    expectAsRecorded(name);
  });

  it.each([
    ['bert_base_tok_amp_bf16_adamw', 0.0002],
    ['bert_base_tok_fp32_sgdm_eager', 0.0003],
  ])('%s (built on the CPU): every allocation and free in order; reserved exact; with its own segment addresses, both peaks exact', (name, allocatedError) => {
    const r = expectSameRequestsPlacedElsewhere(name);
    const m = recording(name);
    expect(r.peak_reserved_bytes).toBe(m.peak_reserved_bytes);
    // a block of 768 KiB more or less where it lands among the segments the driver placed elsewhere
    expect(Math.abs(r.peak_allocated_bytes - m.peak_allocated_bytes)).toBe(786_432);
    expect(Math.abs(r.peak_allocated_bytes - m.peak_allocated_bytes) / m.peak_allocated_bytes).toBeLessThanOrEqual(allocatedError);
  });

  it('bert_base_tok_amp_bf16_adamw loaded with from_pretrained (the path memplan models) peaks exactly as memplan does', () => {
    const runs = (JSON.parse(readFileSync(new URL('../../fixtures/device/h100_materialization.json', import.meta.url), 'utf8')) as { runs: { plan: string; materialized: string; peak_allocated_bytes: number; peak_reserved_bytes: number; step_peak_reserved_bytes: number[] }[] }).runs;
    const run = runs.find((x) => x.plan === 'bert_base_tok_amp_bf16_adamw' && x.materialized === 'from_pretrained')!;
    const plan = parsePlan({ ...recording('bert_base_tok_amp_bf16_adamw').plan, training: { ...recording('bert_base_tok_amp_bf16_adamw').plan.training, steps: run.step_peak_reserved_bytes.length } });
    const r = simulate(plan, { device: planGpu(plan), untilSteady: false, timelinePoints: 0, peakDetails: false });
    expect([r.peak_allocated_bytes, r.peak_reserved_bytes]).toEqual([run.peak_allocated_bytes, run.peak_reserved_bytes]);
  });
});

describe('the head a config.json names', () => {
  it('BertForTokenClassification, RobertaForTokenClassification, XLMRobertaForTokenClassification: num_labels classes, classifier_dropout else the hidden dropout', () => {
    for (const [modelType, arch] of [['bert', 'BertForTokenClassification'], ['roberta', 'RobertaForTokenClassification'], ['xlm-roberta', 'XLMRobertaForTokenClassification']]) {
      const cfg = resolveHfConfig(small({ model_type: modelType, architectures: [arch], num_labels: 9 }));
      expect(cfg.family === 'bert' && cfg.head, arch).toEqual({ kind: 'token_classification', numLabels: 9, dropout: 0.1, bias: true });
    }
    const head = (extra: Record<string, unknown>) => {
      const cfg = resolveHfConfig(small(extra));
      return cfg.family === 'bert' ? cfg.head : null;
    };
    expect(head({ id2label: { 0: 'O', 1: 'B-PER', 2: 'I-PER' }, classifier_dropout: 0 })).toEqual({ kind: 'token_classification', numLabels: 3, dropout: 0, bias: true });
    expect(head({})).toMatchObject({ numLabels: 2 });
    expect(() => head({ id2label: {} })).toThrow(/^model\.hf_config\.id2label: names no class/);
  });
});

describe('what a token classifier trains and allocates', () => {
  it('no pooler; the classifier [num_labels, hidden] on every token: logits [B, T, labels], labels one class id per token', () => {
    const all = allocationsOf(planOf(small({ num_labels: 9 })));
    expect(all.find((a) => a.label === 'labels')!.size).toBe(4 * 32 * 8); // int64 [B, T]
    expect(all.find((a) => a.label === 'classifier')!.size).toBe(4 * 32 * 9 * 2); // bf16 [B, T, 9]
    expect(all.some((a) => a.label.includes('pooler'))).toBe(false);
    expect(all.some((a) => a.label.startsWith('cls.predictions'))).toBe(false);
  });

  it('under autocast the dropout’s fp32 output lives until the forward returns, after the loss (nothing saves it: the classifier keeps its bf16 cast)', () => {
    const all = allocationsOf(planOf(small({ num_labels: 9 }), { precision: 'amp_bf16' }));
    const dropped = all.find((a) => a.label === 'dropout')!;
    expect(dropped.size).toBe(4 * 32 * 64 * 4);
    const nll = all.find((a) => a.label === 'loss')!;
    expect(dropped.free).toBeGreaterThan(nll.alloc);
    expect(dropped.free).toBeLessThan(all.find((a) => a.label.startsWith('grad of'))!.alloc);
  });

  it('under LoRA, PEFT’s TOKEN_CLS copy of the classifier trains (the model’s dtype); XLM-RoBERTa registers its head first (measured)', () => {
    const lora = { r: 4, alpha: 8, target_modules: ['query', 'value'] };
    const plan = planOf(small({ num_labels: 9 }), { lora });
    const r = simulate(plan, { device: planGpu(plan), untilSteady: false, timelinePoints: 0, peakDetails: false });
    const base = simulate(planOf(small({ num_labels: 9 })), { device: planGpu(plan), untilSteady: false, timelinePoints: 0, peakDetails: false });
    // the copy (9 x 64 + 9) and the adapters of query and value in 2 layers (2 x 2 x (4 x 64 + 64 x 4))
    expect(r.model.parameter_count - base.model.parameter_count).toBe(9 * 64 + 9 + 2 * 2 * (4 * 64 + 64 * 4));
    // AdamW keeps state for the copy (it trains), none for the frozen original
    const state = allocationsOf(plan).filter((a) => a.label.endsWith(' exp_avg')).map((a) => a.label);
    expect(state).toEqual(expect.arrayContaining(['classifier.modules_to_save.default.weight exp_avg', 'classifier.modules_to_save.default.bias exp_avg']));
    expect(state).not.toContain('classifier.weight exp_avg');
    expect(state.filter((l) => !l.includes('lora_') && !l.includes('modules_to_save'))).toEqual([]);
    const xlmr = allocationsOf(planOf(small({ model_type: 'xlm-roberta', architectures: ['XLMRobertaForTokenClassification'], num_labels: 9 })));
    expect(xlmr[0]).toMatchObject({ label: 'classifier.weight', size: 9 * 64 * 2 }); // the head reaches the GPU first
  });

  it('LoRA advice for a token classifier that does not fit names PEFT’s TOKEN_CLS task', () => {
    const plan = parsePlan({
      format: 'memplan.plan',
      version: 1,
      model: { hf_config: { ...small({ num_labels: 9 }), hidden_size: 1024, num_hidden_layers: 24, num_attention_heads: 16, intermediate_size: 4096, vocab_size: 30522 } },
      training: { batch_size: 64, seq_len: 512, precision: 'fp32', optimizer: 'adamw' },
      gpu: { memory_limit_bytes: 16 * 2 ** 30 },
    });
    const lora = advise(plan, { device: planGpu(plan) }).advice.find((a) => a.id === 'lora');
    expect(lora).toMatchObject({ task_type: 'TOKEN_CLS' });
    expect(loraConfigCode(lora as Parameters<typeof loraConfigCode>[0])).toContain('task_type="TOKEN_CLS"');
  });
});

describe('decoder token classifiers (GenericForTokenClassification)', () => {
  const llama = (extra: Record<string, unknown> = {}) => ({
    model_type: 'llama',
    architectures: ['LlamaForTokenClassification'],
    hidden_size: 64,
    intermediate_size: 128,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    vocab_size: 1000,
    num_labels: 5,
    ...extra,
  });

  it.each(['llama_4l_tok_bf16_adamw', 'gemma2_4l_tok_bf16_adamw'])("%s: the recording's parameter count and both peaks to the byte", (name) => {
    expectAsRecorded(name);
  });

  it('lora_qwen3_4l_tok_amp_bf16_ckpt (built on the CPU): every allocation and free in order and both peaks exact; a small segment the driver placed elsewhere comes one request later', () => {
    const r = expectSameRequestsPlacedElsewhere('lora_qwen3_4l_tok_amp_bf16_ckpt');
    const m = recording('lora_qwen3_4l_tok_amp_bf16_ckpt');
    expect([r.peak_allocated_bytes, r.peak_reserved_bytes]).toEqual([m.peak_allocated_bytes, m.peak_reserved_bytes]);
  });

  it('every family transformers 5.17 gives one (measured: not OLMo 2, not Gemma 3 text); dropout classifier_dropout, else hidden_dropout, else 0.1; score with a bias unless token_classification_bias is false', () => {
    const families: [string, string][] = [
      ['llama', 'Llama'], ['mistral', 'Mistral'], ['qwen2', 'Qwen2'], ['qwen3', 'Qwen3'], ['phi3', 'Phi3'],
      ['mixtral', 'Mixtral'], ['qwen3_moe', 'Qwen3Moe'], ['smollm3', 'SmolLM3'], ['gemma2', 'Gemma2'],
    ];
    for (const [modelType, model] of families) {
      const cfg = resolveHfConfig({ model_type: modelType, architectures: [`${model}ForTokenClassification`], num_labels: 4 });
      expect(cfg.family !== 'gpt2' && cfg.head, model).toEqual({ kind: 'token_classification', numLabels: 4, dropout: 0.1, bias: true });
    }
    expect(() => resolveHfConfig({ model_type: 'olmo2', architectures: ['Olmo2ForTokenClassification'] })).toThrow(/architectures: "Olmo2ForTokenClassification" is not simulated yet/);
    const head = (extra: Record<string, unknown>) => {
      const cfg = resolveHfConfig(llama(extra));
      return cfg.family === 'llama' ? cfg.head : null;
    };
    expect(head({ hidden_dropout: 0.2 })).toMatchObject({ dropout: 0.2 });
    expect(head({ hidden_dropout: 0.2, classifier_dropout: 0 })).toMatchObject({ dropout: 0 });
    expect(head({ token_classification_bias: false })).toMatchObject({ bias: false });
    // no padding token needed: every token is scored
    expect(head({ pad_token_id: null })).toMatchObject({ kind: 'token_classification' });
  });

  it('the logits [B, T, labels] are upcast to fp32 for the loss (a bf16 model); score’s bias is a parameter, and under LoRA its copy trains with the weight', () => {
    const all = allocationsOf(planOf(llama()));
    expect(all.find((a) => a.label === 'labels')!.size).toBe(4 * 32 * 8);
    expect(all.find((a) => a.label === 'score')!.size).toBe(4 * 32 * 5 * 2);
    expect(all.find((a) => a.label === 'logits.float()')!.size).toBe(4 * 32 * 5 * 4);
    expect(all.some((a) => a.label === 'lm_head')).toBe(false);
    const sizes = (plan: ReturnType<typeof planOf>) => simulate(plan, { device: planGpu(plan), untilSteady: false, timelinePoints: 0, peakDetails: false }).model.parameter_count;
    expect(sizes(planOf(llama())) - sizes(planOf(llama({ token_classification_bias: false })))).toBe(5);
    const lora = { r: 4, alpha: 8, target_modules: ['q_proj', 'v_proj'] };
    // score's copy (5 x 64 + 5) and the adapters of q_proj (64 -> 64) and v_proj (64 -> 32) in 2 layers
    expect(sizes(planOf(llama(), { lora })) - sizes(planOf(llama()))).toBe(5 * 64 + 5 + 2 * (4 * 64 + 64 * 4) + 2 * (4 * 64 + 32 * 4));
    const state = allocationsOf(planOf(llama(), { lora })).filter((a) => a.label.endsWith(' exp_avg')).map((a) => a.label);
    expect(state).toEqual(expect.arrayContaining(['score.modules_to_save.default.weight exp_avg', 'score.modules_to_save.default.bias exp_avg']));
    expect(state.filter((l) => !l.includes('lora_') && !l.includes('modules_to_save'))).toEqual([]);
  });
});

describe('what transformers 5.17 and PEFT 0.21 printed on the H100 (test/fixtures/device/h100_classifier_heads.json)', () => {
  const heads = JSON.parse(readFileSync(new URL('../../fixtures/device/h100_classifier_heads.json', import.meta.url), 'utf8')) as {
    for_token_classification: Record<string, boolean>;
    xlm_roberta_token_classification_modules: string[];
    peft_token_cls_trainable_llama: string[];
    generic_token_classification_dropout_default: number;
    mse_half_backward: { model: string; dtype: string; backward: string }[];
  };
  const modelTypes: Record<string, string> = { Llama: 'llama', Mistral: 'mistral', Qwen2: 'qwen2', Qwen3: 'qwen3', Phi3: 'phi3', Mixtral: 'mixtral', Qwen3Moe: 'qwen3_moe', SmolLM3: 'smollm3', Olmo2: 'olmo2', Gemma2: 'gemma2', Gemma3Text: 'gemma3_text' };

  it('memplan accepts a ForTokenClassification exactly where transformers has one', () => {
    for (const [name, modelType] of Object.entries(modelTypes)) {
      const accepts = () => resolveHfConfig({ model_type: modelType, architectures: [`${name}ForTokenClassification`] });
      if (heads.for_token_classification[name]) expect(accepts, name).not.toThrow();
      else expect(accepts, name).toThrow(/architectures: ".*ForTokenClassification" is not simulated yet/);
    }
    // the list the app's hint names: the decoders without one, and GPT-2 (its language model alone)
    const without = Object.entries(modelTypes).filter(([name]) => !heads.for_token_classification[name]).map(([, modelType]) => modelType);
    expect([...WITHOUT_TOKEN_CLASSIFIER].sort()).toEqual(['gpt2', ...without].sort());
  });

  it('the default dropout, what TOKEN_CLS trains, and the regression precisions PyTorch fails', () => {
    const cfg = resolveHfConfig(llamaConfig());
    expect(cfg.family === 'llama' && cfg.head.kind === 'token_classification' && cfg.head.dropout).toBe(heads.generic_token_classification_dropout_default);
    // PEFT trains the adapters and score's copy, weight and bias: memplan keeps optimizer state for those alone
    const trained = heads.peft_token_cls_trainable_llama.filter((n) => n.includes('modules_to_save')).map((n) => n.replace('base_model.model.', ''));
    const state = allocationsOf(planOf(llamaConfig(), { lora: { r: 4, alpha: 8, target_modules: ['q_proj', 'v_proj'] } })).filter((a) => a.label.endsWith(' exp_avg') && a.label.includes('modules_to_save')).map((a) => a.label.replace(' exp_avg', ''));
    expect(state).toEqual(trained);
    for (const run of heads.mse_half_backward) {
      const precision = run.dtype === 'bfloat16' ? 'bf16' : 'fp16';
      const config = run.model === 'bert' ? small({ architectures: ['BertForSequenceClassification'], num_labels: 1 }) : { ...llamaConfig(), architectures: ['LlamaForSequenceClassification'], pad_token_id: 0, num_labels: 1 };
      expect(() => planOf(config, { precision }), `${run.model} ${run.dtype}`).toThrow(run.backward);
    }
  });

  function llamaConfig() {
    return { model_type: 'llama', architectures: ['LlamaForTokenClassification'], hidden_size: 64, intermediate_size: 128, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 2, vocab_size: 100, num_labels: 5 };
  }
});
