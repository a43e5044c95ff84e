/**
 * The rotary position embedding as the Llama-derived models of transformers 5.x run it (modeling_llama.py
 * `LlamaRotaryEmbedding.forward`, `apply_rotary_pos_emb`, `rotate_half`; Gemma 2 and Gemma 3 copy them), and the
 * last-dimension slice views they take.
 */
import { addTensors, cat, mul, neg, toDType } from '../../ops/elementwise.ts';
import { bmm } from '../../ops/matmul.ts';
import type { Runtime } from '../../ops/runtime.ts';
import type { DType } from '../../tensor/dtype.ts';
import type { Tensor } from '../../tensor/tensor.ts';

/** `x[..., a:b]` of the last dimension: a view; SliceBackward0 builds a zero tensor of x's shape and copies in. */
export function sliceView(rt: Runtime, x: Tensor, shape: readonly number[], label: string): Tensor {
  const { cuda, autograd } = rt;
  const out = cuda.view(x, shape);
  autograd.record('SliceBackward0', [x], [out], [], ([grad]) => [grad ? cuda.empty(x.shape, grad.dtype, `grad of ${label}`) : null]);
  return out;
}

/** `q * cos + rotate_half(q) * sin`, rotate_half = `cat((-x[..., D/2:], x[..., :D/2]), -1)`. */
export function applyRotary(rt: Runtime, x: Tensor, cos: Tensor, sin: Tensor, label: string): Tensor {
  const { cuda } = rt;
  const a = mul(rt, x, cos, `${label} * cos`);
  const halfShape = [...x.shape.slice(0, -1), x.shape[x.shape.length - 1]! / 2];
  const x1 = sliceView(rt, x, halfShape, `${label}[..., :D/2]`);
  const x2 = sliceView(rt, x, halfShape, `${label}[..., D/2:]`);
  const negX2 = neg(rt, x2, `${label} -x2`);
  const rotated = cat(rt, [negX2, x1], x.shape, `${label} rotate_half`);
  cuda.release(negX2);
  cuda.release(x2);
  cuda.release(x1);
  const b = mul(rt, rotated, sin, `${label} rotate_half * sin`);
  cuda.release(rotated);
  const out = addTensors(rt, a, b, `${label} with rotary embedding`);
  cuda.release(b);
  cuda.release(a);
  return out;
}

/**
 * `LlamaRotaryEmbedding.forward` under no_grad: fp32 math (`maybe_autocast(enabled=False)`), then cos and sin
 * [1, T, D] in the hidden states' dtype. `invFreq` is the fp32 buffer [D / 2].
 */
export function rotaryCosSin(rt: Runtime, invFreqBuffer: Tensor, t: number, headDim: number, hiddenDType: DType): [Tensor, Tensor] {
  const { cuda, autograd } = rt;
  const gradMode = autograd.gradMode;
  autograd.gradMode = false;
  const autocast = rt.autocast;
  rt.autocast = null; // maybe_autocast(enabled=False)
  try {
    const positions = cuda.empty([1, 1, t], 'float32', 'rotary: position_ids.float()', 'temporary');
    const invFreq = cuda.view(invFreqBuffer, [1, headDim / 2, 1]);
    const freqs = bmm(rt, invFreq, positions, 'rotary: inv_freq @ position_ids');
    cuda.release(invFreq);
    const emb = cuda.empty([1, t, headDim], 'float32', 'rotary: cat(freqs, freqs)', 'temporary');
    const cosRaw = cuda.empty([1, t, headDim], 'float32', 'rotary: emb.cos()', 'temporary');
    const cos = cuda.empty([1, t, headDim], 'float32', 'rotary: cos * attention_scaling', 'temporary');
    cuda.release(cosRaw);
    const sinRaw = cuda.empty([1, t, headDim], 'float32', 'rotary: emb.sin()', 'temporary');
    const sin = cuda.empty([1, t, headDim], 'float32', 'rotary: sin * attention_scaling', 'temporary');
    cuda.release(sinRaw);
    const cosOut = toDType(rt, cos, hiddenDType, 'rotary cos');
    const sinOut = toDType(rt, sin, hiddenDType, 'rotary sin');
    for (const x of [positions, freqs, emb, cos, sin]) cuda.release(x);
    return [cosOut, sinOut];
  } finally {
    rt.autocast = autocast;
    autograd.gradMode = gradMode;
  }
}
