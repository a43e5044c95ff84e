/**
 * Predictions against real PyTorch: the calibration runs recorded on an H100 (test/fixtures/calibration, made
 * with resources/measure/memplan_measure.py). Plans the engine simulates must meet the accuracy targets of
 * issue #4; the ones it simulates exactly must stay exact, allocation for allocation.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { InputError } from '../../../engine/errors.ts';
import { parsePlan } from '../../../engine/plan/parse.ts';
import { simulate } from '../../../engine/train/simulate.ts';
import { planGpu } from '../../../cli/gpus.ts';
import { recordedAndSimulated } from '../models/allocations.ts';

const dir = new URL('../../fixtures/calibration/', import.meta.url);
const cases = readdirSync(dir).filter((f) => f.endsWith('.json')).map((f) => f.replace(/\.json$/, '')).sort();

interface Measurement {
  plan: unknown;
  status: string;
  peak_allocated_bytes: number;
  peak_reserved_bytes: number;
}

/** Cases whose every allocation and free the engine reproduces, in order and size. */
const EXACT = [
  'layers_mlp_fp16_sgdm_fused',
  'mlp_bf16_adamw_fused',
  'mlp_bf16_sgdm_forloop',
  'mlp_fp32_adam_foreach',
  'mlp_fp32_adamw_forloop_accum2',
  'mlp_amp_bf16_adamw_foreach',
  'mlp_amp_fp16_sgd_foreach',
  'mlp_amp_fp16_adam_fused',
  'layers_token_mlp_amp_bf16_b8',
  'mlp_fp32_sgdm_foreach_ckpt',
  'mlp_amp_bf16_sgdm_ckpt_reentrant',
  'gpt2_small_amp_bf16_adamw',
  'gpt2_small_bf16_accum4_sgdm',
  'gpt2_small_fp32_eager_adam',
  'gpt2_medium_amp_fp16_ckpt_fused',
  'tinyllama_8l_bf16_adamw',
  'qwen2_5_0_5b_amp_bf16_accum2_forloop',
  'qwen2_5_0_5b_bf16_ckpt_eager',
  'bert_base_amp_bf16_adamw',
  'resnet18_amp_fp16_sgdm',
  'resnet50_fp32_sgd_accum2',
  // fp32 ViT: nn.MultiheadAttention over memory-efficient attention (the output's and the gradients' copies)
  'vit_b_16_fp32_adamw_b8',
  'vit_l_16_fp32_sgd_b16',
  // ViT under reentrant checkpointing: the residual stream's memory order decides where AccumulateGrad copies a
  // checkpoint input's gradient and where a linear's view copies its own (test/engine/models/multihead-attention.test.ts)
  'vit_l_16_amp_bf16_adamw_ckpt_reentrant_b24',
  // Qwen3 (per-head q/k RMSNorm), LoRA as PEFT runs it (fp32 adapters, frozen base, enable_input_require_grads
  // under checkpointing) and frozen parameters (issue 14)
  'qwen3_4l_amp_bf16_adamw',
  'qwen3_4l_bf16_ckpt_fused',
  'qwen3_4l_fp32_eager_sgdm',
  'lora_tinyllama_4l_amp_bf16_adamw',
  'lora_tinyllama_4l_amp_bf16_ckpt',
  'tinyllama_4l_freeze_amp_bf16',
  // Phi-3 (fused projections, the rotary embedding's alias, slices and cat) and sliding windows beyond the window
  'phi3_4l_amp_bf16_adamw',
  'lora_phi3_4l_bf16_ckpt',
  'mistral_4l_amp_bf16_window256_ckpt',
  // Mixtral: the router and the grouped_mm experts (sort, gathers, grouped GEMMs, index_put_ in backward)
  'mixtral_4l_bf16_sgdm_s1024',
  'lora_mixtral_4l_bf16_adamw_s512_ckpt',
  // Gemma 2 (the scaled embedding's buffer), the published 2B included, and LoRA on Gemma 2 and Gemma 3
  'gemma2_4l_bf16_adamw',
  'gemma2_4l_amp_bf16_ckpt',
  'gemma2_4l_bf16_eager_sgdm',
  'gemma2_2b_bf16_adamw_s512',
  'lora_gemma2_4l_amp_bf16_ckpt',
  'lora_gemma2_2b_amp_bf16_ckpt_s1024',
  'lora_gemma3_6l_bf16_adamw_s1024',
  // eager attention as transformers recommends for training Gemma: one key/value head (repeat_kv a view the
  // matmuls copy), and each checkpointed layer holding only its own kind's mask
  'gemma3_1b_bf16_eager_adamw_s1024',
  'lora_gemma2_2b_bf16_eager_ckpt_s1024',
  // published sizes, boundary trials (6 steps): Llama 3.2 1B under 20 GiB; Mistral 7B with LoRA under 24 GiB, loaded
  // with from_pretrained as users load it (220,000 events for Gemma 2 9B's trial matched too: not kept, 1.7 MB)
  'llama3_2_1b_bf16_ckpt_adamw_s1024_b6_cap20g',
  'lora_mistral_7b_bf16_qv_ckpt_s2048_b7_cap24g',
  // Phi-3 mini's full fine-tune at 27,648 tokens: CUB's scan in the embedding's backward needs 17 tile states or more
  'phi3_mini_bf16_ckpt_adamw_s1024_b27_cap40g',
  // LoRA on GPT-2: PEFT wraps its Conv1D modules as nn.Linear, and a frozen LayerNorm gets no weight or bias
  // gradients (grad_input_mask)
  'lora_gpt2_small_bf16_c_attn_adamw',
  'lora_gpt2_small_amp_bf16_all_ckpt',
  'lora_gpt2_medium_amp_fp16_c_attn_c_proj',
  // Qwen3-MoE: Qwen3's attention, Mixtral's experts, its own router (softmax with dtype, norm_topk_prob, the weights
  // cast back), the experts registered before the router; with LoRA on q/v and checkpointing
  'qwen3moe_4l_amp_bf16_ckpt_s1024',
  'qwen3moe_4l_bf16_sgdm_nonorm_s1024',
  'lora_qwen3moe_4l_bf16_qv_ckpt_s512',
  // autocast fp16 (the router's fp16 logits softmaxed with half_to_float), and fp32 with dense layers
  // (mlp_only_layers) over the math attention backend (its scaled query a C++ local to the function's end)
  'qwen3moe_4l_amp_fp16_adamw_s512',
  'qwen3moe_4l_fp32_sgd_dense13_s512',
  'lora_tinyllama_4l_fp32_adamw',
  // SmolLM3: Llama's layers, its NoPE layers without a rotary embedding
  'smollm3_4l_bf16_adamw_s1024',
  // OLMo 2: norms after attention and the MLP, q/k norms over the projections, the rotary embedding in fp32
  'olmo2_4l_bf16_adamw_s1024',
  'olmo2_4l_amp_bf16_ckpt_s1024',
  'lora_olmo2_4l_fp32_qv_s512',
  // LoRA on BERT: query and value (PEFT's default) or every Linear, the frozen MLM head tied to the word embedding;
  // eager attention under autocast fp16 (its probabilities left fp32, k's transposed gradient copied by its Linear)
  'lora_bert_base_amp_bf16_qv_ckpt',
  'lora_bert_base_amp_fp16_qv_eager',
  'lora_bert_base_fp32_all_adamw',
  'lora_bert_large_bf16_qv_reentrant_sgdm',
  // BertForSequenceClassification: the pooler's first-token view, the classifier, one class id per sequence; under
  // LoRA the classifier's modules_to_save copy trains in bf16 beside fp32 adapters (foreach AdamW's two dtype groups
  // in the order the unordered_map gives them back)
  'bert_base_cls_amp_bf16_adamw',
  'bert_large_cls_fp32_ckpt_sgdm',
  'lora_bert_base_cls_bf16_qv_adamw',
  'lora_bert_base_cls_amp_fp16_all_reentrant',
  // decoder sequence classifiers (GenericForSequenceClassification): the score on every position, the last non-pad
  // token's logits indexed out (index_put_ with two index tensors, one CUB tile); LoRA with the score's copy
  'llama_4l_cls_bf16_adamw',
  'qwen3_4l_cls_amp_bf16_ckpt',
  'lora_qwen3_4l_cls_bf16_qv_adamw',
  'gemma2_4l_cls_bf16_adamw',
  'lora_gemma3_6l_cls_bf16_qv',
  'phi3_4l_cls_amp_bf16_ckpt',
  'olmo2_4l_cls_bf16_adamw',
  'smollm3_4l_cls_bf16_adamw',
  // without pad_token_id, one sequence a batch: `logits[arange(1), -1]`, the last position selected (a view) and its
  // row indexed (index_put_ with one index tensor in backward), no padding mask
  'llama_4l_cls_nopad_b1_bf16_adamw',
  // one sequence of 16,384 tokens with checkpointing: the packed-sequence check's cumsum over one row runs CUB's scan
  // (1,535 B of storage: 19 tiles)
  'qwen3_4l_amp_bf16_ckpt_b1_s16384',
  // two sequences of 16,384 tokens: logits of 4,978,638,848 elements, past 2^31 (the cross-entropy's 64-bit indexing)
  'qwen3_4l_amp_bf16_ckpt_b2_s16384',
  'qwen3_4l_bf16_ckpt_b2_s16384',
  // sequence lengths that are no multiple of 64 (cuDNN attention, the losses, the embeddings' backward at odd sizes)
  'tinyllama_8l_bf16_adamw_s1000_b3',
  'gpt2_small_amp_bf16_adamw_s777_b5',
  'qwen3_4l_amp_bf16_ckpt_s1500_b2',
  'bert_base_amp_bf16_adamw_s300_b7',
  'gemma2_4l_bf16_adamw_s1000_b2',
  'phi3_4l_amp_bf16_adamw_s333_b4',
  // Phi-4-mini's partial rotary embedding (0.75 of each head) and its longrope update, below the pretraining length
  // and past it (4,200 tokens, the long factors computed in every forward)
  'phi4mini_4l_amp_bf16_adamw_s1024',
  'phi4mini_4l_bf16_eager_sgdm_s512',
  'lora_phi4mini_4l_bf16_ckpt_s4200',
  // regression (MSELoss on logits.squeeze(), float32 labels: the output's storage kept at the elementwise size) and
  // multi-label classification (BCEWithLogitsLoss, bf16 logits against float32 labels under PEFT)
  'bert_base_reg_amp_bf16_adamw',
  'bert_base_ml_fp32_adamw',
  'llama_4l_reg_amp_bf16_ckpt',
  'lora_qwen3_4l_ml_bf16_qv',
  'xlm_roberta_base_reg3_fp32_sgdm',
  // token classifiers (BertForTokenClassification and RoBERTa's): the classifier on every token, its fp32 input
  // under autocast kept by `sequence_output` until the forward returns; XLM-RoBERTa's head registered first
  'lora_roberta_base_tok_bf16_qv',
  'xlm_roberta_base_tok_amp_bf16_ckpt',
  // the decoders' (GenericForTokenClassification): dropout, `score` with a bias, ForTokenClassification's
  // `logits.float()`; the cache dies with the base model's output, before the dropout's output
  'llama_4l_tok_bf16_adamw',
  'gemma2_4l_tok_bf16_adamw',
  // RoBERTa and XLM-RoBERTa: position ids counted from the padding token, their heads (XLM-RoBERTa's moved first)
  'roberta_base_amp_bf16_adamw',
  'roberta_base_cls_bf16_adamw',
  'lora_xlm_roberta_base_cls_amp_bf16_qvd_ckpt',
  // segments placed as the CUDA driver places them (Note [cudaMalloc placement])
  'bert_base_fp32_ckpt_reentrant_sgd',
  // reentrant checkpointing: CheckpointFunction's ctx keeps the layers' closure (position ids, cos and sin) until the
  // next forward rebinds the loss (ReentrantClosures, engine/models/checkpointing.ts)
  'lora_tinyllama_4l_bf16_ckpt_reentrant',
  'lora_gpt2_small_fp32_reentrant_sgdm',
  'phi3_4l_bf16_ckpt_reentrant_sgdm',
  // eager attention with reentrant checkpointing, 8-10 steps: the 4-D masks held by keyword in the closure; under
  // autocast Gemma's `.to(query.dtype)` keeps the roped query's fp32. Every step's requests match, though the
  // simulated allocator's small blocks wander from step to step (Llama's state repeats within none of memplan's 20
  // steps); GPT-2's is in NEAR
  'llama_4l_bf16_eager_reentrant_adamw',
  'gemma2_4l_amp_bf16_eager_reentrant_adamw',
  'lora_qwen3_4l_bf16_eager_reentrant',
  // eager attention under autocast: the roped query fp32 (no copy for `.to(query.dtype)`), a key of one head expanded
  // and cast (a contiguous copy bmm folds), Phi-3's contiguous key (its rotary's cat), the window's float mask on
  // Mistral and Phi-3 at any length, and a batch of one folding every view into bmm's batch
  'tinyllama_4l_amp_bf16_eager_adamw',
  'gemma3_6l_amp_bf16_eager_ckpt_s512',
  'phi3_4l_amp_fp16_eager_sgdm',
  'qwen3_4l_amp_bf16_eager_ckpt',
  'mistral_4l_amp_bf16_eager_s512',
  'lora_gemma2_4l_amp_bf16_eager_qv',
  'phi3_4l_amp_bf16_eager_ckpt_s2048_window',
  'resnet50_amp_bf16_ckpt_adamw',
  'tinyllama_4l_amp_bf16_ckpt_fused',
  // LoRA with modules_to_save (PEFT's copies beside the frozen originals, run in their place): an untied embedding
  // and lm_head; a tied Llama's two copies under autocast with checkpointing (the trained embedding's output needs no
  // enable_input_require_grads leaf); a tied Qwen2's lm_head alone (the embedding stays the frozen original); GPT-2's wte
  'lora_tinyllama_4l_bf16_mts_embed_head_s512',
  'lora_llama32_4l_amp_bf16_mts_embed_head_ckpt_s512',
  'lora_qwen25_4l_bf16_mts_head_ckpt_s512',
  'lora_gpt2_small_amp_bf16_mts_wte_s512',
  // ensure_weight_tying: one copy of the tied embedding, run by the embedding and by lm_head
  'lora_llama32_4l_amp_bf16_mts_tied_ckpt_s512',
  // DoRA: the adapter's product through lora_A and lora_B from torch.eye (its graph dying with it, in a recomputation
  // too), the weight's norm, the magnitude; with a dropout the base output again, without it the base result
  'dora_tinyllama_4l_bf16_qv_s512',
  'dora_llama32_4l_amp_bf16_all_linear_ckpt_s512',
  // PYTORCH_CUDA_ALLOC_CONF as the posts on fragmentation set it: oversize blocks (max_split_size_mb) and rounding to
  // power-of-two divisions (test/engine/train/alloc-conf.test.ts)
  'gpt2_small_amp_bf16_adamw_s1024_b8_maxsplit128',
  'llama_4l_bf16_ckpt_adamw_s2048_b4_maxsplit128',
  'qwen3_4l_bf16_sgdm_s1024_b4_roundup4',
];

/**
 * Recordings of issue 14 whose every allocation matches in size and order but not yet their peaks, each off where
 * the allocator places a block among equal free ones (segments placed bottom-up in these runs; the engine places
 * them top-down: docs/engine.md, known gaps), with the targets they meet.
 */
const NEAR: Record<string, { allocated: number; reserved: number }> = {
  // an unsplit block 1 MiB larger than PyTorch's at the AdamW step's peak: +0.024%; reserved exact
  mixtral_4l_bf16_adamw_s512: { allocated: 0.01, reserved: 0.01 },
  // allocated exact; a 250 MB cross-entropy block finds no free segment in step 2 (+2.9% reserved)
  mixtral_4l_amp_bf16_ckpt: { allocated: 0.01, reserved: 0.03 },
  // the same plan loaded with from_pretrained: the driver placed its segments elsewhere again, and PyTorch reserved
  // 2.2% less than from_config's run (test/engine/models/mixtral.test.ts); memplan +5.2%
  mixtral_4l_amp_bf16_ckpt_pretrained: { allocated: 0.0001, reserved: 0.053 },
  // the same requests in the same order (test/engine/models/smollm3.test.ts); a block's rounded size where it lands
  // leaves allocated 4 MiB under (0.05%); reserved exact
  smollm3_4l_amp_bf16_ckpt_s1024: { allocated: 0.0005, reserved: 0 },
  // the same requests in the same order (test/engine/models/roberta.test.ts); a block's rounded size where it lands
  // leaves allocated 512 KiB under (0.006%); reserved exact
  xlm_roberta_base_fp32_ckpt_sgdm: { allocated: 0.0001, reserved: 0 },
  // a Mixtral classifier built on the CPU: the same requests in the same order, allocated exact; the driver placed its
  // segments where the host's mappings let it (test/engine/models/decoder-classifier.test.ts: with its own segment
  // addresses the replay reserves what PyTorch did); memplan +6.9%
  lora_mixtral_4l_cls_bf16_qv: { allocated: 0, reserved: 0.07 },
  // BERT token classifiers built on the CPU: the same requests in the same order (test/engine/models/token-classifier.test.ts),
  // the driver's segments placed where the host's mappings let it; with its own segment addresses the replay peaks
  // as PyTorch did. A block's rounded size where it lands: 768 KiB under (0.016%) and over (0.027%); reserved exact.
  // Loaded with from_pretrained (test/fixtures/device/h100_materialization.json) the first peaks as memplan does.
  // GPT-2 with eager attention and reentrant checkpointing in AMP: the same requests in the same order over 8 steps
  // (test/engine/models/eager-reentrant.test.ts: its mask saved with the hidden states, the scores freed before
  // `.type(value.dtype)`); a block's rounded size where it lands leaves allocated 230 KiB under (0.006%); reserved
  // exact; with its own segment addresses the replay peaks as PyTorch did
  gpt2_small_amp_bf16_eager_reentrant_sgdm: { allocated: 0.0001, reserved: 0 },
  // Mistral with eager attention at twice its window: the same requests in the same order
  // (test/engine/models/sliding-window.test.ts); a block 3 MiB smaller where it lands (0.13%), as its SDPA sibling
  mistral_4l_bf16_eager_window256_s512: { allocated: 0.002, reserved: 0 },
  bert_base_tok_amp_bf16_adamw: { allocated: 0.0002, reserved: 0 },
  bert_base_tok_fp32_sgdm_eager: { allocated: 0.0003, reserved: 0 },
  // Boundary trials at published sizes loaded with from_pretrained (the safetensors file mapped while the model
  // moves): the same requests in the same order over 6 steps, each with a segment the driver placed elsewhere; with
  // their own segment addresses the replays peak as PyTorch did (test/engine/models/pretrained-placement.test.ts).
  // Gemma 2 2B's full fine-tune: allocated 1.5 MiB under (0.006%), reserved 56 MiB over (0.2%); Llama 3.2 1B in
  // autocast fp16: allocated exact, reserved 16 MiB under (0.057%); Qwen2.5 1.5B half frozen: allocated 6.75 MiB over
  // (0.037%), reserved exact. The largest batches of all three are the H100's (test/fixtures/boundary-suite).
  gemma2_2b_bf16_ckpt_adamw_s512_b4_cap28g_pretrained: { allocated: 0.0001, reserved: 0.003 },
  // LoRA on an untied lm_head too: the same requests in the same order, segments placed elsewhere; both peaks exact
  // (test/engine/models/lora.test.ts)
  lora_tinyllama_4l_bf16_qv_lm_head_s512: { allocated: 0, reserved: 0 },
  // target_modules "all-linear" (every linear layer but lm_head), AMP bf16, checkpointed: the same requests in the
  // same order, one small segment placed elsewhere; both peaks exact (test/engine/models/lora-targets.test.ts)
  lora_tinyllama_4l_amp_bf16_all_linear_ckpt_s512: { allocated: 0, reserved: 0 },
  llama3_2_1b_amp_fp16_ckpt_adamw_s1024_b6_cap28g_pretrained: { allocated: 0, reserved: 0.001 },
  qwen2_5_1_5b_bf16_freeze_half_s1024_b4_cap20g_pretrained: { allocated: 0.0005, reserved: 0 },
  // ViT-B/16 under reentrant checkpointing, built on the CPU: the same requests in the same order
  // (test/engine/models/multihead-attention.test.ts), segments placed among the host's mappings; with their own segment
  // addresses the replays peak as PyTorch did. AMP fp16: allocated 1.79 MB under (0.12%), reserved 38 MiB under
  // (2.3%); fp32: allocated 0.74 MB over (0.05%), reserved 44 MiB under (2.9%)
  vit_b_16_amp_fp16_ckpt_reentrant_sgdm: { allocated: 0.0013, reserved: 0.024 },
  vit_b_16_fp32_sgdm_ckpt_reentrant_b16: { allocated: 0.0006, reserved: 0.029 },
  // a layer list's transformer (layer norm and nn.MultiheadAttention in residuals), checkpointed: the same requests in
  // the same order (test/engine/models/multihead-attention.test.ts); allocated 1 MiB under (0.15%), reserved 12 MiB
  // under (1.35%), where the driver placed segments among the host's mappings
  layers_transformer_amp_bf16_ckpt_adam_forloop: { allocated: 0.0015, reserved: 0.0135 },
  // ResNet-50 under garbage_collection_threshold:0.6,max_split_size_mb:128 and a 6 GiB cap: the same requests in the
  // same order; where segments land decides which cached blocks the collector frees (with its own segment addresses
  // the replay frees PyTorch's: test/engine/train/alloc-conf.test.ts); both peaks exact
  resnet50_amp_bf16_sgdm_b96_gc06_maxsplit128_cap6g: { allocated: 0, reserved: 0 },
};

/**
 * Issue 14's families (Gemma 2 and 3, Mixtral, Phi-3, Mistral with its window, Qwen3, LoRA, frozen parameters): peaks
 * within 1% of the H100's, but for the Mixtral plan whose reserved peak the driver's segment placement moves with
 * how the model was loaded (NEAR).
 */
const ISSUE_14 = /^(lora_|gemma|mixtral|phi3|mistral|qwen3|smollm3|olmo2|tinyllama_4l_freeze)/;

function load(name: string) {
  return JSON.parse(readFileSync(new URL(`${name}.json`, dir), 'utf8')) as Measurement;
}

describe('calibration against an H100', () => {
  const simulated: string[] = [];
  for (const name of cases) {
    const m = load(name);
    if (m.status !== 'ok') continue;
    it(name, () => {
      let result;
      try {
        const plan = parsePlan(m.plan);
        result = simulate(plan, { device: planGpu(plan), untilSteady: false });
      } catch (error) {
        // Not simulated yet: the engine says so clearly (a user's plan gets the same message).
        expect(error).toBeInstanceOf(InputError);
        expect((error as Error).message).toMatch(/not simulated yet/);
        return;
      }
      simulated.push(name);
      const allocatedError = Math.abs(result.peak_allocated_bytes - m.peak_allocated_bytes) / m.peak_allocated_bytes;
      const reservedError = Math.abs(result.peak_reserved_bytes - m.peak_reserved_bytes) / m.peak_reserved_bytes;
      expect(allocatedError).toBeLessThanOrEqual(0.03);
      expect(reservedError).toBeLessThanOrEqual(0.08);
      const near = NEAR[name];
      if (ISSUE_14.test(name) && !near) {
        expect(allocatedError).toBeLessThanOrEqual(0.01);
        expect(reservedError).toBeLessThanOrEqual(0.01);
      }
      if (near) {
        expect(allocatedError).toBeLessThanOrEqual(near.allocated);
        expect(reservedError).toBeLessThanOrEqual(near.reserved);
      }
      if (EXACT.includes(name)) {
        expect(result.peak_allocated_bytes).toBe(m.peak_allocated_bytes);
        expect(result.peak_reserved_bytes).toBe(m.peak_reserved_bytes);
      }
    });
  }

  it('simulates every case listed as exact or near', () => {
    expect(simulated).toEqual(expect.arrayContaining([...EXACT, ...Object.keys(NEAR)]));
  });
});

describe('the allocation sequence of exact cases', () => {
  for (const name of EXACT) {
    it(`${name} matches the recorded trace event for event over all steps`, () => {
      // up to the last run of frees, where the recording's teardown begins
      const { real, sim, end } = recordedAndSimulated(name);
      expect(end).toBeGreaterThan(400);
      expect(real.slice(0, end)).toEqual(sim.slice(0, end));
    });
  }
});

describe('the breakdown at the peak', () => {
  it('accounts for every allocated byte at the recorded peak', () => {
    const m = load('mlp_fp32_adam_foreach');
    const plan = parsePlan(m.plan);
    const r = simulate(plan, { device: planGpu(plan), untilSteady: false });
    const { cached_free, ...held } = r.breakdown_at_peak;
    expect(Object.values(held).reduce((a, b) => a + b, 0)).toBe(m.peak_allocated_bytes);
    expect(cached_free).toBe(m.peak_reserved_bytes - m.peak_allocated_bytes);
    // Blocks as allocated_bytes counts them: rounded, and whole when the remainder is too small to split.
    expect(held.parameter).toBeGreaterThanOrEqual(r.model.parameter_bytes);
    expect(held.optimizer_state).toBeGreaterThanOrEqual(2 * r.model.parameter_bytes); // Adam: exp_avg and exp_avg_sq
    expect(r.largest_at_peak[0]!.bytes).toBeGreaterThanOrEqual(r.largest_at_peak.at(-1)!.bytes);
  });

  it('still does where the simulation let go of storages that could be live at no peak (tens of thousands of storages)', () => {
    // CudaDevice keeps only the storages that can still be live at a peak, pruning the list as it grows past 4,096
    // entries: these runs allocate 6 to 25 thousand storages, so it was pruned many times, and what is left at the
    // end is still everything that was live at the peak, to the byte (every block handed out is a storage's).
    const plans = [
      { format: 'memplan.plan', version: 1, model: { preset: 'gpt2-xl' }, training: { batch_size: 4, seq_len: 1024, precision: 'amp_bf16', optimizer: 'adamw' }, gpu: { name: 'h100-sxm' } },
      { format: 'memplan.plan', version: 1, model: { preset: 'gpt2' }, training: { batch_size: 8, seq_len: 512, precision: 'fp32', activation_checkpointing: 'reentrant', grad_accumulation_steps: 3 }, gpu: { name: 'h100-sxm' } },
      load('llama_4l_reg_amp_bf16_ckpt').plan,
    ];
    for (const input of plans) {
      const plan = parsePlan(input);
      const r = simulate(plan, { device: planGpu(plan) });
      expect(r.timeline.events, plan.name).toBeGreaterThan(12_000); // over 6,000 storages: pruned
      const { cached_free, ...held } = r.breakdown_at_peak;
      expect(Object.values(held).reduce((a, b) => a + b, 0), plan.name).toBe(r.peak_allocated_bytes);
      expect(cached_free).toBe(r.peak_reserved_bytes - r.peak_allocated_bytes);
    }
  });
});

describe('against runs that loaded the model as users do (from_pretrained, then .to("cuda"))', () => {
  // test/fixtures/device/h100_materialization.json: the calibration plans of issue 14, each loaded from a checkpoint
  // that a process of its own saved; memplan models this path. mixtral_4l_amp_bf16_ckpt is the one whose segments'
  // placement moves its reserved peak (test/engine/models/mixtral.test.ts)
  const runs = (JSON.parse(readFileSync(new URL('../../fixtures/device/h100_materialization.json', import.meta.url), 'utf8')) as {
    runs: { plan: string; materialized: string; status: string; peak_allocated_bytes: number; peak_reserved_bytes: number; step_peak_reserved_bytes: number[] }[];
  }).runs.filter((r) => r.materialized === 'from_pretrained' && r.status === 'ok');
  const seen = new Set<string>();
  for (const run of runs) {
    if (seen.has(run.plan)) continue; // repeats gave the same peaks
    seen.add(run.plan);
    it(`${run.plan}: peaks within 1% (allocated) and 1% (reserved)${run.plan === 'mixtral_4l_amp_bf16_ckpt' ? ', reserved 5.2% above' : ''}`, () => {
      const file = new URL(`../../../resources/measure/scenarios/calibration/${run.plan}.json`, import.meta.url);
      const plan = JSON.parse(readFileSync(file, 'utf8')) as { training: Record<string, unknown> };
      plan.training.steps = run.step_peak_reserved_bytes.length;
      const parsed = parsePlan(plan);
      const r = simulate(parsed, { device: planGpu(parsed), untilSteady: false });
      const allocatedError = Math.abs(r.peak_allocated_bytes / run.peak_allocated_bytes - 1);
      const reservedError = Math.abs(r.peak_reserved_bytes / run.peak_reserved_bytes - 1);
      expect(allocatedError).toBeLessThanOrEqual(0.01);
      expect(reservedError).toBeLessThanOrEqual(run.plan === 'mixtral_4l_amp_bf16_ckpt' ? 0.053 : 0.01);
    });
  }
  it('covers Gemma, Mixtral, Phi-3, Qwen3 and LoRA', () => {
    for (const family of ['gemma2', 'gemma3', 'mixtral', 'phi3', 'qwen3', 'lora_']) expect([...seen].some((p) => p.startsWith(family)), family).toBe(true);
  });
});
