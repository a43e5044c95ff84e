/**
 * Attention as transformers 5.x runs it for the models here: heads split by `.view(B, T, H, D).transpose(1, 2)`,
 * the DynamicCache's copies of K and V, `sdpa_attention_forward` (integrations/sdpa_attention.py) and the
 * models' `eager_attention_forward`, and the causal mask `create_causal_mask` materializes for eager attention.
 */
import { castLower, castsLower } from '../../ops/autocast.ts';
import { cumsumScratch } from '../../ops/cub.ts';
import { repeatHeads, scaledDotProductAttention, sdpaBackend, type AttentionDevice, type SdpaBackend } from '../../ops/attention.ts';
import { InputError } from '../../errors.ts';
import { addTensors, cat, mulScalar, promote, softmax, tanh, toDType } from '../../ops/elementwise.ts';
import { copy, matmul, viewCopyingGrad } from '../../ops/matmul.ts';
import { divScalar, dropout } from '../../ops/pointwise.ts';
import type { Runtime } from '../../ops/runtime.ts';
import type { DType } from '../../tensor/dtype.ts';
import type { Tensor } from '../../tensor/tensor.ts';

export type AttentionImpl = 'sdpa' | 'eager';

/**
 * `t.view(B, T, H, D).transpose(1, 2)`: two views. When the gradient will arrive in [B, H, T, D] memory order
 * (`gradInHeadOrder`), ViewBackward0's `grad.reshape(B, T, H*D)` of its transpose is a copy, unless there is one
 * head: [B, 1, T, D] and [B, T, 1, D] are then the same memory order, and the reshape is a view (measured: Gemma 3
 * 1B's single key/value head, gemma3_6l_bf16_adamw_s1024).
 */
export function splitHeads(rt: Runtime, t: Tensor, heads: number, headDim: number, gradInHeadOrder: boolean, label: string): Tensor {
  const { cuda, autograd } = rt;
  const [b, s] = t.shape as [number, number];
  const viewed = gradInHeadOrder && heads !== 1 ? viewCopyingGrad(rt, t, [b, s, heads, headDim], label, 'ViewBackward0') : autograd.view('ViewBackward0', t, [b, s, heads, headDim]);
  const out = autograd.view('TransposeBackward0', viewed, [b, heads, s, headDim]);
  cuda.release(viewed);
  return out;
}


/**
 * `DynamicLayer.update`: `torch.cat([empty, key_states], dim=-2)` then the same for values: new contiguous copies
 * [B, H, T, D] that the cache keeps until the model's output is dropped.
 */
export function cacheUpdate(rt: Runtime, k: Tensor, v: Tensor, label: string): [Tensor, Tensor] {
  const kc = cat(rt, [k], k.shape, `${label} key (DynamicCache copy)`);
  // The layer's empty tensors take the key's dtype (`lazy_initialization`): cat promotes a value of another dtype
  // (under autocast the rotary embedding leaves keys in fp32, the value projection gives bf16: measured fp32).
  const vc = cat(rt, [v], v.shape, `${label} value (DynamicCache copy)`, promote(k.dtype, v.dtype));
  return [kc, vc];
}

export interface AttentionCall {
  impl: AttentionImpl;
  device: AttentionDevice;
  dropoutP: number;
  /** The additive [B, 1, T, T] mask eager attention gets (null: causal through is_causal / none). */
  mask: Tensor | null;
  /** Are k and v contiguous [B, H, T, D] tensors (cache copies), rather than views of a projection? */
  kvContiguous: boolean;
  /** Softmax in fp32 then cast back (Llama-family eager attention), rather than in the scores' dtype. */
  softmaxFp32: boolean;
  /**
   * What eager attention casts the probabilities to: the query's dtype (Llama-family and Gemma: `softmax(...,
   * dtype=torch.float32).to(query.dtype)`), the value's (GPT-2: `.type(value.dtype)`), or nothing (BERT: they stay
   * in softmax's dtype). Under autocast a query after the rotary embedding is fp32 (cos and sin are in the
   * hidden states' dtype, fp32 weights' in AMP), so `.to(query.dtype)` keeps the fp32 probabilities and the matmul
   * with v casts them; the value is the projection's bf16 or fp16. Measured: lora_bert_base_amp_fp16_qv_eager,
   * gemma2_4l_amp_bf16_eager_reentrant_adamw, gpt2_small_amp_bf16_eager_reentrant_sgdm.
   */
  probsCast: 'query' | 'value' | 'none';
  /**
   * Softmax and the cast to v's dtype are two statements (GPT-2's eager_attention_forward: `attn_weights =
   * softmax(attn_weights, dim=-1)`, then `attn_weights = attn_weights.type(value.dtype)`): the scores die as the
   * softmax statement rebinds them, before the cast, where Llama's one statement keeps them to its end. Measured
   * in AMP, where the cast copies: gpt2_small_amp_bf16_eager_reentrant_sgdm.
   */
  castApart?: boolean;
  /**
   * k and v are repeat_kv's expanded views of one key/value head (kvContiguous false): their heads do not fold into
   * bmm's batch, so the matmuls copy them, unless autocast's cast copied first: `.to()` of an overlapping tensor is
   * contiguous (measured: gemma3_6l_amp_bf16_eager_ckpt_s512, the roped fp32 key cast, the bf16 value copied).
   */
  kvExpanded?: boolean;
  /** Fewer key/value heads than query heads (SDPA gets `enable_gqa=True`). */
  gqa?: boolean;
  /** Is q a contiguous [B, H, T, D] tensor (Phi-3's rotary embedding ends in a cat), rather than a transposed view? */
  qContiguous?: boolean;
  /**
   * Is k, like q, a contiguous [B, H, T, D] tensor (Phi-3) without a cache? Eager attention's `q @ k^T` then folds
   * k's heads into bmm's batch without a copy (measured: phi3_4l_amp_bf16_eager_ckpt_s2048_window).
   */
  kContiguous?: boolean;
  /**
   * Gemma 2's `attn_logit_softcapping` in eager attention (eager_attention_forward: `w / softcap`, `tanh`,
   * `* softcap` before the mask). SDPA takes no soft-cap: sdpa_attention_forward leaves it in **kwargs.
   */
  softcap?: boolean;
  label: string;
}

/**
 * The kernel `scaled_dot_product_attention` runs for a call with q in `dtype`. With a mask (a sliding window, from
 * the window on) `repeat_kv` ran first, so k and v have q's heads; and flash attention takes no mask, so where it
 * would run PyTorch runs the memory-efficient kernel (recorded on the H100 with cuDNN attention turned off, as the
 * A100 runs it: Gemma 3's sliding layers ran the memory-efficient kernel and its global layers flash attention,
 * test/fixtures/calibration-a100-sdpa).
 */
export function sdpaBackendOf(dtype: DType, call: Pick<AttentionCall, 'device' | 'gqa' | 'mask'>): SdpaBackend {
  const unmasked = sdpaBackend(dtype, 2, call.gqa && !call.mask ? 1 : 2, call.device);
  return call.mask && unmasked === 'flash' ? 'efficient' : unmasked;
}

/**
 * Which of q, k and v get their gradient back in [B, H, T, D] memory order, so that the `view(B, T, H, D)` before
 * the heads' transpose must copy it (splitHeads): eager attention's bmm gradients are [B*H, T, D] for q and v,
 * while k's (through k^T) is [B*H, D, T], which views back; cuDNN and flash make dk and dv like k and v, which
 * are [B, H, T, D] copies when the cache made them; memory-efficient attention makes all three [B, T, H, D].
 * Measured on the H100 (gpt2_small_fp32_eager_adam, gpt2_small_amp_bf16_adamw).
 */
export function gradCopies(q: { dtype: DType }, call: Pick<AttentionCall, 'impl' | 'device' | 'kvContiguous' | 'gqa' | 'mask'>): { q: boolean; k: boolean; v: boolean } {
  if (call.impl === 'eager') return { q: true, k: false, v: true };
  const backend = sdpaBackendOf(q.dtype, call);
  // the math backend's gradients are [B, H, T, D] (scaling multiplications, sums of the repeats)
  if (backend === 'math') return { q: true, k: true, v: true };
  const kv = backend !== 'efficient' && call.kvContiguous;
  return { q: false, k: kv, v: kv };
}

/**
 * transformers' `repeat_kv`: `x[:, :, None].expand(B, KV, n_rep, T, D).reshape(B, KV * n_rep, T, D)`. The reshape
 * copies ([B, H, T, D], contiguous) unless there is one key/value head (multi-query attention: Gemma 3 1B): the
 * expanded dimension then merges with a dimension of size 1 and the result is a view, nothing allocated (measured:
 * lora_gemma3_1b_bf16_all_linear_s512, gemma3_6l_*). Either way ExpandBackward0 sums the repeats back to x's shape.
 * Eager attention's matmuls then copy such a view (its repeated heads do not fold into bmm's batch): `kvContiguous`
 * false (measured: gemma3_1b_bf16_eager_adamw_s1024).
 */
export function repeatKv(rt: Runtime, x: Tensor, heads: number, label: string): Tensor {
  if (x.shape[1] !== 1) return repeatHeads(rt, x, heads, label);
  const { cuda, autograd } = rt;
  const out = cuda.view(x, [x.shape[0]!, heads, x.shape[2]!, x.shape[3]!]);
  autograd.record('ExpandBackward0', [x], [out], [], ([grad]) => [grad ? cuda.sumTo(grad, x.shape, `grad of ${label} (repeats summed)`) : null]);
  return out;
}

/**
 * The attention of q [B, H, T, D] over k, v; returns `attn_output.transpose(1, 2)` made contiguous and reshaped
 * to [B, T, H*D], as the models then use it (sdpa: views, the output being in that order already; eager: a copy),
 * and the attention weights eager attention also returns (the caller holds them until it returns).
 */
export function attend(rt: Runtime, q: Tensor, k: Tensor, v: Tensor, call: AttentionCall): { out: Tensor; weights: Tensor | null } {
  const { cuda, autograd } = rt;
  const [b, h, t, d] = q.shape as [number, number, number, number];
  if (call.impl === 'sdpa') {
    // With a mask (a sliding window), `use_gqa_in_sdpa` is false: repeat_kv first (locals of sdpa_attention_forward)
    const repeat = call.mask !== null && k.shape[1] !== h;
    const kr = repeat ? repeatKv(rt, k, h, `${call.label} key`) : cuda.ref(k);
    const vr = repeat ? repeatKv(rt, v, h, `${call.label} value`) : cuda.ref(v);
    // scaled_dot_product_attention is on autocast's lower-precision list: v, k, q cast (right to left) first
    const [qc, kc, vc] = castLower(rt, [q, kr, vr], [`${call.label} query`, `${call.label} key`, `${call.label} value`]);
    const backend = sdpaBackendOf(qc!.dtype, { device: call.device, mask: call.mask, gqa: kc!.shape[1] !== qc!.shape[1] });
    if (call.mask && backend !== 'cudnn' && !(backend === 'efficient' && qc!.dtype !== 'float32')) {
      const kernel = backend === 'math' ? 'math' : 'memory-efficient';
      const instead = backend === 'math' ? 'train in fp16' : 'train in bf16, fp16 or AMP';
      throw new InputError('training.seq_len', `reaches the sliding window: SDPA then gets a mask, and a masked ${kernel} kernel in ${qc!.dtype} is not simulated yet (memplan simulates a masked cuDNN attention, and the memory-efficient kernel in half types): ${instead}, or use a seq_len below the window`);
    }
    // the math backend reshapes what is not in [B, H, T, D] memory: the cache's copies are
    const headMajor = { q: call.qContiguous ?? false, k: call.kvContiguous || repeat, v: call.kvContiguous || repeat };
    const out = scaledDotProductAttention(rt, qc!, kc!, vc!, backend, { dropoutP: call.dropoutP, label: call.label, headMajor, attnMask: call.mask });
    for (const x of [qc, kc, vc]) cuda.release(x);
    cuda.release(vr);
    cuda.release(kr);
    const transposed = autograd.view('TransposeBackward0', out, [b, t, h, d]);
    cuda.release(out);
    // `.transpose(1, 2).contiguous()`: the math backend's output is in [B, H, T, D] memory, and cuDNN's and flash
    // attention's when q is (their output is `empty_like(q)`; measured for flash: Phi-3's fused qkv,
    // test/fixtures/calibration-a100-sdpa/phi3_4l_bf16_adamw_seq256_b30_cap12g_a100sdpa): those copy
    const merged = backend === 'math' || ((backend === 'cudnn' || backend === 'flash') && headMajor.q) ? copy(rt, transposed, [b, t, h * d], `${call.label} output (contiguous)`) : autograd.view('ViewBackward0', transposed, [b, t, h * d]);
    cuda.release(transposed);
    return { out: merged, weights: null };
  }
  // eager_attention_forward
  const kT = autograd.view('TransposeBackward0', k, [b, k.shape[1]!, d, t]);
  // an expanded key or value that autocast casts is a contiguous copy by the time bmm folds it
  const folds = (x: Tensor) => call.kvContiguous || (call.kvExpanded === true && castsLower(rt, x));
  const scores = matmul(rt, q, kT, { aContiguous: call.qContiguous ?? false, bContiguous: folds(k) || call.kContiguous === true }, `${call.label} q @ k^T`);
  cuda.release(kT);
  let w = mulScalar(rt, scores, `${call.label} scores * scaling`);
  cuda.release(scores);
  if (call.softcap) {
    // `attn_weights = attn_weights / softcap; attn_weights = torch.tanh(attn_weights); attn_weights = attn_weights
    // * softcap`: each rebinding frees the previous scores; TanhBackward0 keeps its result [B, H, T, T]
    const divided = divScalar(rt, w, `${call.label} scores / softcap`);
    cuda.release(w);
    const capped = tanh(rt, divided, `${call.label} tanh(scores / softcap)`);
    cuda.release(divided);
    w = mulScalar(rt, capped, `${call.label} tanh(...) * softcap`);
    cuda.release(capped);
  }
  if (call.mask) {
    const masked = addTensors(rt, w, call.mask, `${call.label} scores + mask`);
    cuda.release(w);
    w = masked;
  }
  // `softmax(w, dim=-1, dtype=...).to(query.dtype)`: one statement, w rebound after it (GPT-2: two, castApart)
  let probs = softmax(rt, w, `${call.label} softmax`, call.softmaxFp32 ? 'float32' : undefined);
  if (call.castApart) cuda.release(w);
  const castTo = call.probsCast === 'query' ? q.dtype : call.probsCast === 'value' ? v.dtype : probs.dtype;
  if (probs.dtype !== castTo) {
    const cast = toDType(rt, probs, castTo, `${call.label} softmax${call.probsCast === "value" ? ".type(value.dtype)" : ".to(query.dtype)"}`);
    cuda.release(probs);
    probs = cast;
  }
  if (!call.castApart) cuda.release(w);
  const dropped = dropout(rt, probs, call.dropoutP, `${call.label} attention dropout`);
  cuda.release(probs);
  // its output is transposed before the copy: the gradient comes back transposed
  const out = matmul(rt, dropped, v, { aContiguous: true, bContiguous: folds(v), outGradContiguous: false }, `${call.label} probs @ v`);
  const transposed = autograd.view('TransposeBackward0', out, [b, t, h, d]);
  cuda.release(out);
  const merged = copy(rt, transposed, [b, t, h * d], `${call.label} output (contiguous)`);
  cuda.release(transposed);
  return { out: merged, weights: dropped };
}

/**
 * `create_causal_mask` for eager attention (masking_utils.py `sdpa_mask` then `eager_mask`): index aranges for
 * batch, head, query and key positions (each `arange(n) + offset`), the bool `kv_idx <= q_idx` [1, 1, T, T],
 * then `torch.where(mask, tensor(0.0), finfo.min)` [B, 1, T, T] in the model's dtype (two scalars on the GPU).
 * Measured on the H100 (gpt2_small_fp32_eager_adam).
 */
export function eagerCausalMask(rt: Runtime, batch: number, seq: number, dtype: DType): Tensor {
  const { cuda } = rt;
  const small = (n: number, what: string) => cuda.empty([n], 'int64', `causal mask: ${what}`, 'temporary');
  const batchIdx = small(batch, 'arange(batch)');
  const headIdx = small(1, 'arange(1)');
  const qArange = small(seq, 'arange(q)');
  const qIdx = small(seq, 'q_idx');
  cuda.release(qArange);
  const kvArange = small(seq, 'arange(kv)');
  const kvIdx = small(seq, 'kv_idx');
  cuda.release(kvArange);
  const allowed = cuda.empty([1, 1, seq, seq], 'bool', 'causal mask: kv_idx <= q_idx', 'temporary');
  for (const t of [batchIdx, headIdx, qIdx, kvIdx]) cuda.release(t);
  return eagerFloatMask(rt, allowed, batch, seq, dtype, 'causal mask', 'causal mask');
}

/**
 * masking_utils.py `eager_mask`'s conversion: `torch.where(allowed, tensor(0.0), finfo.min)` [B, 1, T, T] in
 * `dtype` (two scalars on the GPU), the bool mask `allowed` dying after it.
 */
function eagerFloatMask(rt: Runtime, allowed: Tensor, batch: number, seq: number, dtype: DType, what: string, label: string): Tensor {
  const { cuda } = rt;
  const zero = cuda.empty([], dtype, `${what}: tensor(0.0)`, 'temporary');
  const min = cuda.empty([], dtype, `${what}: finfo.min`, 'temporary');
  const mask = cuda.empty([batch, 1, seq, seq], dtype, label, 'activation');
  cuda.release(min);
  cuda.release(zero);
  cuda.release(allowed);
  return mask;
}

/**
 * masking_utils.py `sdpa_mask` for `sliding_window_causal_mask_function(window)` once T reaches the window (below
 * it the mask is skipped): the index aranges (`arange(T) + offset` for q and kv: the arange dies), then
 * `and_masks`: `result = q_idx.new_ones(())`, `result & (kv_idx > q_idx - window)`, `result & (kv_idx <= q_idx)`,
 * each [1, 1, T, T] bool, the previous result and the overlay dying after each `&`; the aranges die when it
 * returns; `expand(B, -1, T, T)` is a view. Measured on the H100 (mistral_4l_bf16_window256_s512).
 */
export function slidingWindowMask(rt: Runtime, batch: number, seq: number): Tensor {
  const { cuda } = rt;
  const small = (n: number, what: string) => cuda.empty([n], 'int64', `sliding-window mask: ${what}`, 'temporary');
  const batchIdx = small(batch, 'arange(batch)');
  const headIdx = small(1, 'arange(1)');
  const qArange = small(seq, 'arange(q)');
  const qIdx = small(seq, 'q_idx');
  cuda.release(qArange);
  const kvArange = small(seq, 'arange(kv)');
  const kvIdx = small(seq, 'kv_idx');
  cuda.release(kvArange);
  let result = cuda.empty([], 'bool', 'sliding-window mask: new_ones(())', 'temporary');
  for (const [what, before] of [['kv_idx > q_idx - window', 'q_idx - window'], ['kv_idx <= q_idx', null]] as const) {
    const shifted = before ? cuda.empty([1, 1, seq, 1], 'int64', `sliding-window mask: ${before}`, 'temporary') : null;
    const overlay = cuda.empty([1, 1, seq, seq], 'bool', `sliding-window mask: ${what}`, 'temporary');
    cuda.release(shifted);
    const next = cuda.empty([1, 1, seq, seq], 'bool', 'sliding-window mask', 'activation');
    cuda.release(overlay);
    cuda.release(result);
    result = next;
  }
  for (const t of [batchIdx, headIdx, qIdx, kvIdx]) cuda.release(t);
  const expanded = cuda.view(result, [batch, 1, seq, seq]);
  cuda.release(result);
  return expanded;
}

/**
 * The eager mask of a sliding-window model (`create_sliding_window_causal_mask` then `eager_mask`): the bool mask
 * built with `and_masks` as for SDPA (slidingWindowMask), at any length (eager attention never skips it), then
 * `torch.where(mask, tensor(0.0), finfo.min)` [B, 1, T, T] in `dtype`. Measured on the H100: Gemma 2's sliding
 * layers (gemma2_4l_bf16_eager_sgdm), and Mistral and Phi-3 below their windows (mistral_4l_amp_bf16_eager_s512,
 * phi3_4l_amp_fp16_eager_sgdm: their configs set `sliding_window`, so their masks are these too).
 */
export function eagerSlidingWindowMask(rt: Runtime, batch: number, seq: number, dtype: DType): Tensor {
  return eagerFloatMask(rt, slidingWindowMask(rt, batch, seq), batch, seq, dtype, 'sliding-window mask', 'sliding-window mask (eager)');
}

/**
 * masking_utils.py `find_packed_sequence_indices(position_ids.expand(B, -1))`, run by the mask builders when there
 * is neither an attention mask nor a cache (training with gradient checkpointing): `position_ids[:, :1] - 1`,
 * `torch.diff(..., prepend=...)` (a cat of T + 1 columns, then the difference), `(diff != 1).cumsum(-1)` (the
 * bool converted to int64 for the scan; at batch 1 CUB's scan, which asks for temporary storage), `(mask[:, -1] ==
 * 0).all()`; it returns None and its locals die. Measured on the H100 (gpt2_medium_amp_fp16_ckpt_fused; at batch 1
 * qwen3_4l_cls_nopad_b1_amp_bf16_ckpt).
 */
export function findPackedSequenceIndices(rt: Runtime, batch: number, seq: number): void {
  const { cuda } = rt;
  const first = cuda.empty([batch, 1], 'int64', 'packed-sequence check: position_ids[:, :1] - 1', 'temporary');
  const combined = cuda.empty([batch, seq + 1], 'int64', 'packed-sequence check: diff prepend', 'temporary');
  const diff = cuda.empty([batch, seq], 'int64', 'packed-sequence check: diff', 'temporary');
  cuda.release(combined);
  const notOne = cuda.empty([batch, seq], 'bool', 'packed-sequence check: diff != 1', 'temporary');
  const cumsum = cuda.empty([batch, seq], 'int64', 'packed-sequence check: cumsum', 'temporary');
  const asLong = cuda.empty([batch, seq], 'int64', 'packed-sequence check: cumsum input as int64', 'temporary');
  cumsumScratch(rt, [batch, seq], -1, 'int64', 'packed-sequence check: cumsum'); // one sequence: one row, CUB's scan
  cuda.release(asLong);
  cuda.release(notOne);
  const last = cuda.empty([batch], 'bool', 'packed-sequence check: mask[:, -1] == 0', 'temporary');
  const all = cuda.empty([], 'bool', 'packed-sequence check: all()', 'temporary');
  cuda.release(last);
  cuda.release(all);
  for (const t of [first, diff, cumsum]) cuda.release(t);
}
