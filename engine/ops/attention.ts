/**
 * `F.scaled_dot_product_attention(q, k, v, is_causal=..., dropout_p=...)` in training, q/k/v [B, H, L, D]
 * (aten/src/ATen/native/transformers: sdp_utils.cpp picks the backend; attention.cu, attention_backward.cu,
 * cuda/flash_attn/flash_api.cpp, the cuDNN frontend in MHA.cpp allocate).
 *
 * Backend, as PyTorch 2.11 picks it without a mask:
 * - fp16/bf16 on compute capability 9.x/10.x with cuDNN newer than 9.15 (PyTorch's CUDA 13 wheels ship 9.19):
 *   cuDNN attention first (`check_prefer_cudnn_attention`). Measured on the H100 with C++ stacks: GPT-2's
 *   attention, dropout 0.1, runs ScaledDotProductCudnnAttentionBackward0 (test/fixtures/probes).
 * - fp16/bf16 elsewhere from compute capability 8.0 (and on AMD GPUs): flash attention.
 * - below compute capability 8.0 (V100, T4), where flash attention does not run (`check_flash_attention_hardware_
 *   support`): fp16 memory-efficient attention; bf16 the math backend (memory-efficient attention takes half and
 *   float only there: `less_than_sm80_mem_efficient_dtypes`, sdp_utils.cpp). Read from the source, not measured.
 * - fp32: memory-efficient attention (flash and cuDNN take half types only); with fewer key/value heads the math
 *   backend (memory-efficient attention has no grouped-query kernel).
 *
 * Memory layout: the fused backends allocate their output in [B, L, H, D] order (cuDNN and flash follow the
 * query's memory order, which is that for a query made by `.view(B, L, H, D).transpose(1, 2)` and for elementwise
 * ops on it; memory-efficient attention always allocates [B, L, H, D]). So Hugging Face's
 * `out.transpose(1, 2).contiguous()` copies nothing and the gradient arrives in the output's order. The math
 * backend's output is a bmm's, [B, H, L, D]: that `.contiguous()` copies.
 */
import { DTYPE_BYTES, type DType } from '../tensor/dtype.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { mulScalar } from './elementwise.ts';
import { matmul } from './matmul.ts';
import { dropout } from './pointwise.ts';
import type { Runtime } from './runtime.ts';

export type SdpaBackend = 'cudnn' | 'flash' | 'efficient' | 'math';

/** What picks the backend besides the inputs. */
export interface AttentionDevice {
  /** `torch.cuda.get_device_capability()`. */
  computeCapability: readonly [number, number];
  /** AMD GPUs (ROCm) have no cuDNN: half types go to flash attention (aotriton). */
  vendor?: 'nvidia' | 'amd';
}

/** The backend PyTorch 2.11 runs for q [B, H, L, D] over k, v with `kvHeads` heads, without a mask. */
export function sdpaBackend(dtype: DType, heads: number, kvHeads: number, device: AttentionDevice): SdpaBackend {
  // memory-efficient attention takes no enable_gqa (measured: "No available kernel"): PyTorch runs the math one
  if (dtype !== 'float16' && dtype !== 'bfloat16') return kvHeads !== heads ? 'math' : 'efficient';
  const major = device.computeCapability[0];
  if (device.vendor === 'amd') return 'flash';
  if (major === 9 || major === 10) return 'cudnn';
  if (major < 8) return dtype === 'bfloat16' || kvHeads !== heads ? 'math' : 'efficient';
  return 'flash';
}

export interface SdpaOptions {
  dropoutP: number;
  /** `is_causal` (math builds the mask; the fused kernels take the flag). Default true. */
  causal?: boolean;
  /**
   * Is each input's memory in [B, H, L, D] order (default false: Hugging Face's q, k, v are [B, L, H, D] memory
   * viewed as [B, H, L, D])? The math backend's reshapes copy what is not.
   */
  headMajor?: { q: boolean; k: boolean; v: boolean };
  /**
   * Does the output's gradient come back in the query's memory order rather than the output's (default false)?
   * `nn.MultiheadAttention` copies a memory-efficient output to [L, B, H, D] (its query's order), so the gradient
   * arrives in that order, and `_efficient_attention_backward` makes it contiguous (`grad_out_.contiguous()`).
   */
  gradInQueryOrder?: boolean;
  /** Names the tensors in the breakdown. k and v may have fewer heads than q (`enable_gqa=True`). */
  label: string;
  /**
   * A boolean `attn_mask` (cuDNN and memory-efficient attention): `scaled_dot_product_attention` converts it first
   * (`convert_boolean_attn_mask`: `where(mask, scalar_tensor(0), scalar_tensor(-inf))` in the query's dtype, the
   * mask's shape materialized), and the kernel saves that bias for its backward (measured: mistral_4l_bf16_window256_s512
   * with cuDNN, test/fixtures/calibration-a100-sdpa with the memory-efficient kernel).
   */
  attnMask?: Tensor | null;
}

const roundUp = (n: number, m: number) => Math.ceil(n / m) * m;

/** The attention output [B, H, L, D] (memory in [B, L, H, D] order). */
export function scaledDotProductAttention(rt: Runtime, q: Tensor, k: Tensor, v: Tensor, backend: SdpaBackend, options: SdpaOptions): Tensor {
  if (backend === 'cudnn') return cudnnAttention(rt, q, k, v, options);
  if (backend === 'flash') return flashAttention(rt, q, k, v, options, rt.cuda);
  if (backend === 'math') return mathAttention(rt, q, k, v, options);
  return efficientAttention(rt, q, k, v, options);
}

/**
 * `convert_boolean_attn_mask`: a boolean mask as an additive bias, `where(mask, scalar_tensor(0),
 * scalar_tensor(-inf))` in the query's dtype, the mask's shape materialized; the kernel saves it for its backward.
 */
function maskAsBias(rt: Runtime, attnMask: Tensor, dtype: DType, label: string): Tensor {
  const { cuda } = rt;
  const negInf = cuda.empty([], dtype, `${label} mask: scalar_tensor(-inf)`, 'temporary');
  const zero = cuda.empty([], dtype, `${label} mask: scalar_tensor(0)`, 'temporary');
  const bias = cuda.empty(attnMask.shape, dtype, `${label} mask as bias`, 'activation');
  cuda.release(negInf);
  cuda.release(zero);
  return bias;
}

/**
 * cuDNN attention (`_scaled_dot_product_cudnn_attention_cuda`): seed and offset (two int64 scalars, always),
 * the output, the softmax statistics [B, H, L, 1] fp32 (when a gradient is needed), and cuDNN's workspace for the
 * duration of the call. Backward: dq, dk, dv like the inputs, then cuDNN's backward workspace. Measured on the
 * H100 (cuDNN 9.19, D = 64): forward workspace 256 B; backward workspace B*H*L*D*4 + B*H*L*4 + 256 B (an fp32 dQ
 * accumulator and a row statistic), e.g. 12,779,776 B for B=8, H=12, L=512 and 8,519,936 B for B=16, H=8, L=256.
 */
function cudnnAttention(rt: Runtime, q: Tensor, k: Tensor, v: Tensor, { label, attnMask }: SdpaOptions): Tensor {
  const { cuda, autograd } = rt;
  const [b, h, l] = q.shape as [number, number, number, number];
  const d = q.shape[3]!;
  const bias = attnMask ? maskAsBias(rt, attnMask, q.dtype, label) : null;
  const needs = autograd.needsGrad([q, k, v]);
  const savedInputs = autograd.saveInputs(needs, bias ? [q, k, v, bias] : [q, k, v]);
  const seed = cuda.empty([], 'int64', `${label} cuDNN seed`, 'activation');
  const offset = cuda.empty([], 'int64', `${label} cuDNN offset`, 'activation');
  const out = cuda.empty([b, h, l, d], q.dtype, label, 'activation');
  const stats = needs ? cuda.empty([b, h, l, 1], 'float32', `${label} softmax stats`, 'activation') : null;
  const ws = cuda.empty([256], 'uint8', `${label} cuDNN workspace`, 'workspace');
  cuda.release(ws);
  const saved = needs ? [...savedInputs, cuda.ref(out), cuda.ref(stats!), cuda.ref(seed), cuda.ref(offset)] : [];
  cuda.release(stats);
  cuda.release(offset);
  cuda.release(seed);
  autograd.record('ScaledDotProductCudnnAttentionBackward0', [q, k, v], [out], saved, ([grad]) => {
    if (!grad) return [null, null, null];
    const dq = cuda.empty(q.shape, q.dtype, `grad of ${label} query`);
    const dk = cuda.empty(k.shape, k.dtype, `grad of ${label} key`);
    const dv = cuda.empty(v.shape, v.dtype, `grad of ${label} value`);
    // with fewer key/value heads (GQA) cuDNN also takes per-query-head dK and dV: measured 33,816,832 B for
    // B=4, H=32, Hkv=4, L=512, D=64 bf16 (TinyLlama)
    const s = k.shape[2]!;
    const gqa = k.shape[1] !== h ? 2 * b * h * s * d * DTYPE_BYTES[q.dtype] : 0;
    const bwd = cuda.empty([b * h * l * d * 4 + b * h * l * 4 + 256 + gqa], 'uint8', `${label} cuDNN backward workspace`, 'workspace');
    cuda.release(bwd);
    return [dq, dk, dv];
  });
  cuda.release(bias);
  return out;
}

/**
 * Flash attention (`_flash_attention_forward` -> `mha_fwd`): the output like the query, the log-sum-exp
 * [B, H, L] fp32, the RNG state (uint64[2]) and an unused scalar; with dropout the RNG state is made again
 * (the first one dies). Backward (`mha_bwd`): dq, dk, dv like the inputs, `softmax_d` [B, H, round128(L)] fp32 and
 * the fp32 dQ accumulator [B, round128(L), H, round32(D)], freed on return; with fewer k/v heads, dk and dv are
 * first computed per query head ([B, S, H, D]) and summed.
 */
function flashAttention(rt: Runtime, q: Tensor, k: Tensor, v: Tensor, { dropoutP, label, headMajor }: SdpaOptions, device: { multiProcessorCount: number }): Tensor {
  const { cuda, autograd } = rt;
  const [b, h, l, d] = q.shape as [number, number, number, number];
  const needs = autograd.needsGrad([q, k, v]);
  const savedInputs = autograd.saveInputs(needs, [q, k, v]);
  const out = cuda.empty([b, h, l, d], q.dtype, label, 'activation');
  const lse = cuda.empty([b, h, l], 'float32', `${label} logsumexp`, 'activation');
  // Without dropout, few query blocks split the keys (set_params_splitkv): fp32 partial results per split, freed
  // when mha_fwd returns (measured: 2 splits for B=2, H=16, L=256, D=80).
  const splits = dropoutP > 0 ? 1 : flashSplits(b * h * Math.ceil(l / 64), 2 * device.multiProcessorCount, Math.ceil(k.shape[2]! / (d <= 64 ? 256 : d <= 128 ? 128 : 64)));
  const accumulators =
    splits > 1
      ? [cuda.empty([splits, b, h, l], 'float32', `${label} softmax_lse_accum`, 'workspace'), cuda.empty([splits, b, h, l, roundUp(d, 32)], 'float32', `${label} out_accum`, 'workspace')]
      : [];
  let rng = cuda.empty([2], 'int64', `${label} RNG state`, 'activation');
  const unused = cuda.empty([], 'int64', `${label} (unused)`, 'activation');
  if (dropoutP > 0) {
    const again = cuda.empty([2], 'int64', `${label} RNG state`, 'activation');
    cuda.release(rng);
    rng = again;
  }
  // the split accumulators are locals of mha_fwd, which makes the RNG state first (measured: Gemma 3's global
  // layers with flash attention, test/fixtures/calibration-a100-sdpa/gemma3_6l_*)
  for (const t of accumulators) cuda.release(t);
  const saved = needs ? [...savedInputs, cuda.ref(out), cuda.ref(lse), cuda.ref(rng), cuda.ref(unused)] : [];
  for (const t of [unused, rng, lse]) cuda.release(t);
  autograd.record('ScaledDotProductFlashAttentionBackward0', [q, k, v], [out], saved, ([grad]) => {
    if (!grad) return [null, null, null];
    const hk = k.shape[1]!;
    const s = k.shape[2]!;
    // `out.contiguous()` in [B, L, H, D] order for mha_bwd: a copy when the output followed a query in [B, H, L, D]
    // memory (Phi-3's, split from the fused qkv projection), alive until the backward returns (measured:
    // test/fixtures/calibration-a100-sdpa/phi3_4l_bf16_adamw_seq256_b30_cap12g_a100sdpa)
    const outCopy = headMajor?.q ? cuda.empty([b, l, h, d], q.dtype, `${label} backward: out (contiguous)`, 'workspace') : null;
    const dq = cuda.empty(q.shape, q.dtype, `grad of ${label} query`);
    const dk = cuda.empty(k.shape, k.dtype, `grad of ${label} key`);
    const dv = cuda.empty(v.shape, v.dtype, `grad of ${label} value`);
    const softmaxD = cuda.empty([b, h, roundUp(l, 128)], 'float32', `${label} backward: softmax_d`, 'workspace');
    const dqAccum = cuda.empty([b, roundUp(l, 128), h, roundUp(d, 32)], 'float32', `${label} backward: dq_accum`, 'workspace');
    const expanded = hk !== h ? [cuda.empty([b, s, h, d], k.dtype, `${label} backward: dk expanded`, 'workspace'), cuda.empty([b, s, h, d], v.dtype, `${label} backward: dv expanded`, 'workspace')] : [];
    for (const t of [...expanded.reverse(), dqAccum, softmaxD]) cuda.release(t);
    cuda.release(outCopy);
    return [dq, dk, dv];
  });
  return out;
}

/**
 * The widest head the memory-efficient forward runs in one value iteration (its kernels for kMaxK 64 and 128);
 * wider heads run the kMaxK 65536 kernel, which needs an output accumulator when the output is not fp32.
 */
const kEfficientSingleIterationMaxK = 128;

/** The memory-efficient kernel reads its bias in rows of a multiple of 8 elements (`mem_eff_alignment`). */
const kEfficientBiasAlignment = 8;

/**
 * Memory-efficient attention (`_efficient_attention_forward`): the output [B, L, H, D] and the log-sum-exp
 * [B, H, round32(L)] fp32 (seed and offset are CPU scalars). Backward (`_efficient_attention_backward`): grad q,
 * k, v; `delta` [B, H, L] fp32 (for fp32 inputs computed as (grad * out).sum(-1), whose product is a full-size
 * temporary); the kernel's workspace, an fp32 dQ accumulator per key split:
 * 4 * B * H * align4(ceil(L/BI) * ceil(D/BJ) * (4 + BI*BJ)) bytes with cutlassB.h's tile BI x BJ.
 */
function efficientAttention(rt: Runtime, q: Tensor, k: Tensor, v: Tensor, { label, gradInQueryOrder = false, attnMask }: SdpaOptions): Tensor {
  const { cuda, autograd } = rt;
  const [b, h, l, d] = q.shape as [number, number, number, number];
  let bias = attnMask ? maskAsBias(rt, attnMask, q.dtype, label) : null;
  if (bias && bias.shape.at(-1)! % kEfficientBiasAlignment !== 0) {
    // `preprocess_mask`: a bias whose rows are not 8-aligned is padded (`pad_bias<8>`) and sliced back; the
    // unpadded one dies at once, the kernel keeps the padded one (measured: seq_len 300 padded to 304, 264 not,
    // test/fixtures/calibration-a100-sdpa/mistral_4l_bf16_window256_s{264,300}_a100sdpa)
    const shape = bias.shape;
    const padded = cuda.empty([...shape.slice(0, -1), roundUp(shape.at(-1)!, kEfficientBiasAlignment)], q.dtype, `${label} mask as bias (padded)`, 'activation');
    cuda.release(bias);
    bias = cuda.view(padded, shape);
    cuda.release(padded);
  }
  const needs = autograd.needsGrad([q, k, v]);
  const savedInputs = autograd.saveInputs(needs, bias ? [q, k, v, bias] : [q, k, v]);
  const out = cuda.empty([b, h, l, d], q.dtype, label, 'activation');
  const lse = cuda.empty([b, h, needs ? roundUp(l, 32) : 0], 'float32', `${label} logsumexp`, 'activation');
  if (q.dtype !== 'float32' && d > kEfficientSingleIterationMaxK) {
    // heads wider than one value iteration accumulate the output in fp32 first (kNeedsOutputAccumulatorBuffer:
    // `output_accum`, [B, L, H, D], freed when the kernel returns; measured: Gemma 3's D = 256,
    // test/fixtures/calibration-a100-sdpa/gemma3_6l_*)
    const accum = cuda.empty([b, l, h, d], 'float32', `${label} output_accum`, 'workspace');
    cuda.release(accum);
  }
  const saved = needs ? [...savedInputs, cuda.ref(out), cuda.ref(lse)] : [];
  cuda.release(lse);
  autograd.record('ScaledDotProductEfficientAttentionBackward0', [q, k, v], [out], saved, ([grad]) => {
    if (!grad) return [null, null, null];
    // `grad_out_.contiguous()` (attention_backward.cu): a copy when the gradient is not in [B, L, H, D] order,
    // alive until the function returns
    const gradOut = gradInQueryOrder ? cuda.empty(grad.shape, grad.dtype, `${label} backward: grad_out (contiguous)`, 'workspace') : null;
    const dq = cuda.empty(q.shape, q.dtype, `grad of ${label} query`);
    const dk = cuda.empty(k.shape, k.dtype, `grad of ${label} key`);
    const dv = cuda.empty(v.shape, v.dtype, `grad of ${label} value`);
    let delta: Tensor;
    if (q.dtype === 'float32') {
      // `(grad.to(kFloat) * out.to(kFloat)).sum(-1).transpose(-2, -1).contiguous()`: the temporaries die at the
      // end of the full expression, last made first.
      const product = cuda.empty(grad.shape, 'float32', `${label} backward: grad * out`);
      const sum = cuda.sumTo(product, [b, l, h, 1], `${label} backward: (grad * out).sum(-1)`);
      delta = cuda.empty([b, h, l], 'float32', `${label} backward: delta`, 'workspace');
      cuda.release(sum);
      cuda.release(product);
    } else {
      delta = cuda.empty([b, h, l], 'float32', `${label} backward: delta`, 'workspace');
    }
    const [bi, bj] = efficientBackwardTile(q.dtype === 'float32' ? 4 : DTYPE_BYTES[q.dtype], d);
    const perBH = roundUp(Math.ceil(l / bi) * Math.ceil(d / bj) * (4 + bi * bj), 4);
    const workspace = cuda.empty([b * h * perBH * 4], 'uint8', `${label} backward: workspace`, 'workspace');
    cuda.release(workspace);
    cuda.release(delta);
    cuda.release(gradOut);
    return [dq, dk, dv];
  });
  cuda.release(bias);
  return out;
}

/**
 * The math backend (`_scaled_dot_product_attention_math`), fp32 inputs: `q * sqrt(scale)`; the causal mask
 * (`ones(L, S).tril()` converted to an additive fp32 [L, S] with two scalars); for fewer key/value heads
 * `repeat_interleave` of k and v (contiguous copies); `k^T * sqrt(scale)`; `matmul` (bmm over [B*H], reshapes
 * that copy inputs not in [B, H, ...] memory order); the mask added in place; `_safe_softmax` (its result, and
 * `eq`/`all` temporaries); `matmul` with v. Backward: the output gradient reshaped (a copy), bmm's gradients,
 * softmax's (plus a `grad * output` temporary), the scaling multiplications', and the sums undoing
 * repeat_interleave. Measured on the H100 for 4 fp32 shapes with the backend forced (test/engine/ops).
 */
function mathAttention(rt: Runtime, q: Tensor, k: Tensor, v: Tensor, { dropoutP, label, causal = true, headMajor = { q: false, k: false, v: false } }: SdpaOptions): Tensor {
  const { cuda, autograd } = rt;
  const [b, h, l, d] = q.shape as [number, number, number, number];
  const hk = k.shape[1]!;
  const s = k.shape[2]!;
  // merging B and H for bmm is a view when the memory is [B, H, ...] or there is one batch
  const mergeable = (headOrder: boolean) => headOrder || b === 1;
  const qs = mulScalar(rt, q, `${label} q * sqrt(scale)`);
  let mask: Tensor | null = null;
  if (causal) {
    const ones = cuda.empty([l, s], 'bool', `${label} ones(L, S)`, 'temporary');
    const tril = cuda.empty([l, s], 'bool', `${label} tril`, 'temporary');
    cuda.release(ones);
    const zero = cuda.empty([], q.dtype, `${label} scalar 0`, 'temporary');
    const negInf = cuda.empty([], q.dtype, `${label} scalar -inf`, 'temporary');
    mask = cuda.empty([l, s], q.dtype, `${label} causal mask`, 'temporary');
    cuda.release(negInf);
    cuda.release(zero);
    cuda.release(tril);
  }
  const gqa = hk !== h;
  const kRep = gqa ? repeatHeads(rt, k, h, `${label} key`) : cuda.ref(k);
  const vRep = gqa ? repeatHeads(rt, v, h, `${label} value`) : cuda.ref(v);
  const kT = autograd.view('TransposeBackward0', kRep, [b, h, d, s]);
  const kTs = mulScalar(rt, kT, `${label} k^T * sqrt(scale)`);
  cuda.release(kT);
  const scores = matmul(rt, qs, kTs, { aContiguous: mergeable(headMajor.q), bContiguous: gqa || mergeable(headMajor.k) }, `${label} q @ k^T`);
  cuda.release(kTs);
  let attn = scores;
  if (mask) {
    attn = cuda.ref(scores); // attn.add_(mask)
    autograd.record('AddBackward0', [scores, mask], [attn], [], ([grad]) => [grad ? cuda.ref(grad) : null, null]);
    cuda.release(scores);
  }
  const probs = safeSoftmax(rt, attn, `${label} softmax`);
  cuda.release(attn);
  const dropped = dropoutP > 0 ? dropout(rt, probs, dropoutP, `${label} dropout`) : cuda.ref(probs);
  cuda.release(probs);
  const out = matmul(rt, dropped, vRep, { aContiguous: true, bContiguous: gqa || mergeable(headMajor.v), outGradContiguous: b === 1 }, `${label} probs @ v`);
  // the function returns: its locals die in reverse order of declaration (attn, the expanded key and value, the
  // scaled query, the mask; attn and the expanded value are saved for backward, so those frees show no event); the
  // scaled query is a C++ local, not a temporary of the first matmul
  for (const t of [dropped, vRep, kRep, qs, mask]) cuda.release(t);
  return out;
}

/**
 * `t.repeat_interleave(heads / t.heads, dim=-3)` (and transformers' `repeat_kv`, the same memory): a contiguous
 * [B, heads, T, D] copy; ExpandBackward0 sums the repeats back to t's shape.
 */
export function repeatHeads(rt: Runtime, t: Tensor, heads: number, label: string): Tensor {
  const { cuda, autograd } = rt;
  const out = cuda.empty([t.shape[0]!, heads, t.shape[2]!, t.shape[3]!], t.dtype, `${label} repeated`, 'activation');
  autograd.record('ExpandBackward0', [t], [out], [], ([grad]) => [grad ? cuda.sumTo(grad, t.shape, `grad of ${label} (repeats summed)`) : null]);
  return out;
}

/**
 * `_safe_softmax(x, -1)`: the softmax (saved), rows that are all -inf zeroed through `eq` and `all` temporaries
 * and a scalar; backward `_softmax_backward_data` (the gradient and a `grad * output` temporary).
 */
function safeSoftmax(rt: Runtime, x: Tensor, label: string): Tensor {
  const { cuda, autograd } = rt;
  const out = cuda.empty(x.shape, x.dtype, label, 'activation');
  const eq = cuda.empty(x.shape, 'bool', `${label} eq(-inf)`, 'temporary');
  const rows = cuda.empty([...x.shape.slice(0, -1), 1], 'bool', `${label} all`, 'temporary');
  const zero = cuda.empty([], x.dtype, `${label} scalar 0`, 'temporary');
  for (const t of [zero, rows, eq]) cuda.release(t);
  const saved = autograd.needsGrad([x]) ? [cuda.ref(out)] : [];
  autograd.record('SafeSoftmaxBackward0', [x], [out], saved, ([grad]) => {
    if (!grad) return [null];
    const gradInput = cuda.empty(x.shape, x.dtype, `grad of ${label}`);
    cuda.release(cuda.empty(grad.shape, grad.dtype, `${label} backward: grad * output`));
    return [gradInput];
  });
  return out;
}

/** flash_api.cpp `num_splits_heuristic`: how many splits of the keys fill the GPU's SMs best. */
function flashSplits(batchHeadsBlocks: number, numSMs: number, numNBlocks: number): number {
  if (batchHeadsBlocks >= 0.8 * numSMs) return 1;
  const maxSplits = Math.min(128, numSMs, numNBlocks);
  const eligible = (n: number) => n === 1 || Math.ceil(numNBlocks / n) !== Math.ceil(numNBlocks / (n - 1));
  const efficiency: number[] = [];
  let best = 0;
  for (let n = 1; n <= maxSplits; n++) {
    if (!eligible(n)) {
      efficiency.push(0);
      continue;
    }
    const waves = (batchHeadsBlocks * n) / numSMs;
    const e = waves / Math.ceil(waves);
    best = Math.max(best, e);
    efficiency.push(e);
  }
  for (let n = 1; n <= maxSplits; n++) if (eligible(n) && efficiency[n - 1]! >= 0.85 * best) return n;
  return 1;
}

/** cutlassB.h: the first backward kernel whose shared memory fits, by element size and head dim. */
function efficientBackwardTile(elementBytes: number, headDim: number): [number, number] {
  if (headDim <= 64) return [64, 64];
  return elementBytes === 4 ? [128, 64] : [128, 128];
}
