/**
 * Decoder sequence classifiers as transformers 5.17 trains them (GenericForSequenceClassification: LlamaFor-,
 * MistralFor-, Qwen2For-, Qwen3ForSequenceClassification; engine/models/hf/config.ts `decoderHead`, common.ts
 * `lastTokenClassificationLoss`): the `score` layer on every position, the logits of each sequence's last token that
 * is not padding, and the loss its problem_type takes (common.ts `classificationLoss`); under LoRA, PEFT's SEQ_CLS task keeps a trainable
 * copy of `score`. test/engine/train/calibration.test.ts compares the H100 recordings event by event.
 */
import { describe, expect, it } from 'vitest';
import { InputError } from '../../../engine/errors.ts';
import { resolveHfConfig } from '../../../engine/models/hf/config.ts';
import { parsePlan } from '../../../engine/plan/parse.ts';
import { findMaxBatch } from '../../../engine/search/max-batch.ts';
import { simulate } from '../../../engine/train/simulate.ts';
import { planGpu } from '../../../cli/gpus.ts';
import { allocationsOf, expectAsRecorded, recordedPlan, recording, expectSameRequestsPlacedElsewhere, planOf } from './allocations.ts';

const small = (extra: Record<string, unknown> = {}) => ({
  model_type: 'qwen3',
  architectures: ['Qwen3ForSequenceClassification'],
  hidden_size: 128,
  intermediate_size: 256,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 32,
  vocab_size: 1000,
  pad_token_id: 0,
  ...extra,
});

describe('decoder sequence classifiers recorded on the H100', () => {
  it.each([
    ['llama_4l_cls_bf16_adamw', 0],
    ['qwen3_4l_cls_amp_bf16_ckpt', 0],
    ['lora_qwen3_4l_cls_bf16_qv_adamw', 0],
    // reentrant checkpointing with LoRA in autocast fp16: CheckpointFunction keeps the decoder layers' arguments
    // (position_ids, cos and sin) until the graph dies (ReentrantClosures); GradScaler skipped the recording's first
    // two steps (random data), as its plan is simulated here
    ['lora_llama_4l_cls_amp_fp16_all_reentrant', 0],
    // the other decoder families' classifiers, each exact event for event
    ['gemma2_4l_cls_bf16_adamw', 0],
    ['lora_gemma3_6l_cls_bf16_qv', 0],
    ['phi3_4l_cls_amp_bf16_ckpt', 0],
    ['olmo2_4l_cls_bf16_adamw', 0],
    ['smollm3_4l_cls_bf16_adamw', 0],
  ])("%s: the recording's parameter count, what trains under LoRA, and its peaks", (name, allocatedError) => {
    expectAsRecorded(name, allocatedError);
  });
});

describe('mixture-of-experts classifiers: the same requests, segments placed elsewhere', () => {
  // Mixtral and Qwen3-MoE built on the CPU: where the driver puts their segments depends on the host's mappings
  // (Note [cudaMalloc placement], engine/allocator/device-memory.ts), which memplan does not simulate
  it.each([
    ['lora_mixtral_4l_cls_bf16_qv', 0.07],
    ['qwen3moe_4l_cls_bf16_adamw', 0.001],
  ])('%s: every allocation and free in order; peak allocated exact; with its own segment addresses, reserved exact too', (name, reservedError) => {
    const r = expectSameRequestsPlacedElsewhere(name);
    const m = recording(name);
    expect(r.peak_allocated_bytes).toBe(m.peak_allocated_bytes);
    expect(Math.abs(r.peak_reserved_bytes - m.peak_reserved_bytes) / m.peak_reserved_bytes).toBeLessThanOrEqual(reservedError);
  });
});

describe('the head a decoder config.json names', () => {
  it('<Model>ForSequenceClassification for llama, mistral, qwen2 and qwen3; the classes as for BERT', () => {
    for (const [modelType, model] of [['llama', 'Llama'], ['mistral', 'Mistral'], ['qwen2', 'Qwen2'], ['qwen3', 'Qwen3']] as const) {
      const cfg = resolveHfConfig(small({ model_type: modelType, architectures: [`${model}ForSequenceClassification`], id2label: { 0: 'a', 1: 'b', 2: 'c' } }));
      expect(cfg.family === 'llama' && cfg.head).toEqual({ kind: 'sequence_classification', numLabels: 3, problem: 'single_label_classification', architecture: `${model}ForSequenceClassification`, padded: true });
    }
    const causal = resolveHfConfig(small({ architectures: ['Qwen3ForCausalLM'] }));
    expect(causal.family === 'llama' && causal.head).toEqual({ kind: 'causal_lm' });
  });

  it('pad_token_id: a token id, or none (the last position, batch 1 only)', () => {
    const cfg = resolveHfConfig(small({ pad_token_id: null }));
    expect(cfg.family === 'llama' && cfg.head.kind === 'sequence_classification' && cfg.head.padded).toBe(false);
    expect(() => resolveHfConfig(small({ pad_token_id: -1 }))).toThrow(/^model\.hf_config\.pad_token_id: must be a token id/);
    expect(() => resolveHfConfig(small({ architectures: ['Qwen3ForQuestionAnswering'] }))).toThrow(/^model\.hf_config\.architectures: "Qwen3ForQuestionAnswering" is not simulated yet; memplan trains Qwen3ForCausalLM or Qwen3ForSequenceClassification or Qwen3ForTokenClassification for this model_type$/);
  });

  it('every decoder family has its classifier (GenericForSequenceClassification in transformers 5.17)', () => {
    const classifiers: [string, string][] = [
      ['phi3', 'Phi3ForSequenceClassification'],
      ['mixtral', 'MixtralForSequenceClassification'],
      ['qwen3_moe', 'Qwen3MoeForSequenceClassification'],
      ['smollm3', 'SmolLM3ForSequenceClassification'],
      ['olmo2', 'Olmo2ForSequenceClassification'],
      ['gemma2', 'Gemma2ForSequenceClassification'],
      ['gemma3_text', 'Gemma3TextForSequenceClassification'],
    ];
    for (const [modelType, arch] of classifiers) {
      const cfg = resolveHfConfig({ model_type: modelType, architectures: [arch], pad_token_id: 0, num_labels: 4 });
      expect(cfg.family !== 'gpt2' && cfg.family !== 'bert' && cfg.head, arch).toEqual({ kind: 'sequence_classification', numLabels: 4, problem: 'single_label_classification', architecture: arch, padded: true });
    }
  });

  it('the score runs on every position; the last token’s logits are indexed out, and their gradient put back into zeros', () => {
    const all = allocationsOf(planOf(small({ num_labels: 3 })));
    expect(all.find((a) => a.label === 'score')!.size).toBe(4 * 32 * 3 * 2); // [B, T, labels] bf16
    expect(all.find((a) => a.label === 'pooled_logits')!.size).toBe(4 * 3 * 2);
    expect(all.find((a) => a.label === 'grad of logits[arange, last_non_pad_token]')!.size).toBe(4 * 32 * 3 * 2);
    // index_put_ sorts 4 pairs in one CUB tile: 1 byte of temporary storage
    expect(all.find((a) => a.label.endsWith('index_put_ CUB radix sort'))!.size).toBe(1);
    // no language-model head
    expect(all.some((a) => a.label === 'lm_head' || a.label === 'logits.float()')).toBe(false);
  });

  it('index_put_’s CUB sort: one tile (1 byte) up to 2,304 pairs, then its storage over the bits of B x T - 1', () => {
    // measured on the H100 with the same logits[arange(B), last_non_pad_token] backward (a probe this session):
    // 2,304 x 4 -> 1 B; 2,305 x 4 (14 bits) -> 43,007 B; 4,096 x 16 (16 bits) -> 71,167 B
    const cub = (batch: number, seqLen: number) =>
      allocationsOf(planOf(small({ num_hidden_layers: 1, hidden_size: 32, intermediate_size: 32, num_attention_heads: 2, num_key_value_heads: 1, head_dim: 16, vocab_size: 64 }), { batch_size: batch, seq_len: seqLen, optimizer: 'sgd' })).find((a) => a.label.endsWith('index_put_ CUB radix sort'))!.size;
    expect(cub(2304, 4)).toBe(1);
    expect(cub(2305, 4)).toBe(43_007);
    expect(cub(4096, 16)).toBe(71_167);
  });

  it('under LoRA the score trains as PEFT’s modules_to_save copy', () => {
    const labels = new Set(allocationsOf(planOf(small(), { lora: { r: 4, alpha: 8, target_modules: ['q_proj', 'v_proj'] } })).map((a) => a.label));
    expect(labels.has('score.modules_to_save.default.weight exp_avg')).toBe(true);
    expect(labels.has('score.weight exp_avg')).toBe(false);
  });
});

describe('without pad_token_id: one sequence a batch, its last position', () => {
  const unpadded = () => small({ pad_token_id: undefined, num_labels: 3 });
  const batchOf = (batch: number, extra: Record<string, unknown> = {}) => ({
    format: 'memplan.plan',
    version: 1,
    model: { hf_config: unpadded() },
    training: { batch_size: batch, seq_len: 32, precision: 'bf16', optimizer: 'adamw', steps: 1, ...extra },
  });

  it.each([
    // exact event for event (calibration.test.ts)
    ['llama_4l_cls_nopad_b1_bf16_adamw', 0, 0],
    // the same requests in the same order, one segment placed elsewhere; peaks exact
    ['qwen3_4l_cls_nopad_b1_amp_bf16_ckpt', 0, 0],
    // reentrant checkpointing with LoRA in autocast fp16, GradScaler's skipped steps as recorded: peaks exact
    ['lora_llama_4l_cls_nopad_b1_amp_fp16_all_reentrant', 0, 0],
  ])('%s: recorded on the H100, its peaks', (name, allocatedError, reservedError) => {
    const m = recording(name);
    const plan = parsePlan(recordedPlan(m));
    const r = simulate(plan, { device: planGpu(plan), untilSteady: false, timelinePoints: 0 });
    expect(Math.abs(r.peak_allocated_bytes - m.peak_allocated_bytes) / m.peak_allocated_bytes).toBeLessThanOrEqual(allocatedError);
    expect(Math.abs(r.peak_reserved_bytes - m.peak_reserved_bytes) / m.peak_reserved_bytes).toBeLessThanOrEqual(reservedError);
  });

  it('logits[arange(1), -1]: the last position selected (a view), its row indexed out; no padding mask', () => {
    const all = allocationsOf(planOf(unpadded(), { batch_size: 1 }));
    const labels = new Set(all.map((a) => a.label));
    expect(all.find((a) => a.label === 'pooled_logits')!.size).toBe(3 * 2);
    // SelectBackward0's zeros of the logits' shape [1, T, labels], IndexBackward0's of the selected row [1, labels]
    expect(all.find((a) => a.label === 'grad of logits[:, -1] (select)')!.size).toBe(32 * 3 * 2);
    expect(all.find((a) => a.label === 'grad of pooled_logits (zeros, then index_put_)')!.size).toBe(3 * 2);
    for (const padded of ['input_ids != pad_token_id', 'non_pad_mask', 'last_non_pad_token', 'grad of logits[arange, last_non_pad_token]']) expect(labels.has(padded), padded).toBe(false);
    // with pad_token_id at batch 1, the padding mask as before
    const withPad = new Set(allocationsOf(planOf(small({ num_labels: 3 }), { batch_size: 1 })).map((a) => a.label));
    expect(withPad.has('non_pad_mask')).toBe(true);
  });

  it('a plan of more than one sequence a batch is refused at pad_token_id, as transformers raises (measured: llama_4l_cls_nopad_b2_bf16_adamw)', () => {
    expect(() => parsePlan(batchOf(1))).not.toThrow();
    expect(() => parsePlan(batchOf(2))).toThrow(
      /^model\.hf_config\.pad_token_id: without pad_token_id, Qwen3ForSequenceClassification trains one sequence a batch: .* at batch 2 transformers raises "Cannot handle batch sizes > 1 if no padding token is defined\."; set pad_token_id/,
    );
    // gradient accumulation of micro-batches of one runs
    expect(() => parsePlan(batchOf(1, { grad_accumulation_steps: 8 }))).not.toThrow();
  });

  it('a search stops at batch 2 with the same message, at the field', () => {
    const plan = parsePlan({ ...batchOf(1), gpu: { memory_limit_bytes: 2 ** 34 } });
    let thrown: unknown;
    try {
      findMaxBatch(plan, { device: planGpu(plan) });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(InputError);
    expect((thrown as InputError).where).toBe('model.hf_config.pad_token_id');
    expect((thrown as InputError).message).toMatch(/at batch 2 transformers raises/);
  });
});

describe('the packed-sequence check at batch 1 (checkpointing, no cache): cumsum over one row runs CUB’s scan', () => {
  const scans = (batch: number, seqLen: number) =>
    allocationsOf(planOf(small({ architectures: ['Qwen3ForCausalLM'] }), { batch_size: batch, seq_len: seqLen, activation_checkpointing: true })).filter((a) => a.label === 'packed-sequence check: cumsum: CUB scan');
  // measured (test/fixtures/device/h100_cub_scan.json): one row asks for CUB's storage, two rows for the result alone
  it('its temporary storage (1,279 B for 1,024 tokens, measured), at batch 1 only', () => {
    expect(scans(1, 1024).map((a) => a.size)).toEqual([1279]);
    expect(scans(2, 1024)).toEqual([]);
  });
});
