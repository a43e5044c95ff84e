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
 * [1, T, D] in the hidden states' dtype, D the dimensions it turns (Phi-3's `partial_rotary_factor` of head_dim).
 * `invFreq` is the fp32 buffer [D / 2].
 */
export function rotaryCosSin(rt: Runtime, invFreqBuffer: Tensor, t: number, dim: number, hiddenDType: DType): [Tensor, Tensor] {
  const { cuda, autograd } = rt;
  const gradMode = autograd.gradMode;
  autograd.gradMode = false;
  const autocast = rt.autocast;
  rt.autocast = null; // maybe_autocast(enabled=False)
  try {
    const positions = cuda.empty([1, 1, t], 'float32', 'rotary: position_ids.float()', 'temporary');
    const invFreq = cuda.view(invFreqBuffer, [1, dim / 2, 1]);
    const freqs = bmm(rt, invFreq, positions, 'rotary: inv_freq @ position_ids');
    cuda.release(invFreq);
    const emb = cuda.empty([1, t, dim], 'float32', 'rotary: cat(freqs, freqs)', 'temporary');
    const cosRaw = cuda.empty([1, t, dim], 'float32', 'rotary: emb.cos()', 'temporary');
    const cos = cuda.empty([1, t, dim], 'float32', 'rotary: cos * attention_scaling', 'temporary');
    cuda.release(cosRaw);
    const sinRaw = cuda.empty([1, t, dim], 'float32', 'rotary: emb.sin()', 'temporary');
    const sin = cuda.empty([1, t, dim], 'float32', 'rotary: sin * attention_scaling', 'temporary');
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

/**
 * `dynamic_rope_update`'s longrope branch (modeling_rope_utils.py `longrope_frequency_update`), before each rotary
 * forward of a `rope_type: "longrope"` config: `seq_len = torch.max(position_ids) + 1` and `seq_len > original`
 * on the GPU, then `inv_freq` becomes the short factors' buffer (`original_inv_freq`, already on the GPU) or, past
 * the pretraining length, the long factors' frequencies computed anew (`_compute_longrope_parameters`:
 * `torch.tensor(long_factor)`, `arange(0, dim, 2).float() / dim`, `1.0 / (ext_factors * base**inv_freq_shape)`;
 * its `hasattr(self, f"{layer_type}_long_inv_freq")` never finds the `long_inv_freq` it sets, so every forward
 * computes them), and the buffer it replaces is freed. Python's order, as the H100 recorded it
 * (test/fixtures/calibration/*phi4mini*): the comparison dies once `if` has read it; the long frequencies'
 * temporaries, then that function's locals as it returns; the replaced buffer at `register_buffer`; `seq_len` as
 * the update returns. `buffers` are the model's tensors by name; `dim` the dimensions turned.
 */
export function longropeFrequencyUpdate(rt: Runtime, buffers: Map<string, Tensor>, t: number, dim: number, originalMax: number): void {
  const { cuda } = rt;
  const max = cuda.empty([], 'int64', 'rotary: torch.max(position_ids)');
  const seqLen = cuda.empty([], 'int64', 'rotary: seq_len = max + 1');
  cuda.release(max);
  cuda.release(cuda.empty([], 'bool', 'rotary: seq_len > original_max_position_embeddings'));
  const name = 'model.rotary_emb.inv_freq';
  const previous = buffers.get(name)!;
  if (t > originalMax) {
    const half = [dim / 2];
    const extFactors = cuda.empty(half, 'float32', 'rotary: torch.tensor(long_factor)');
    const steps = cuda.empty(half, 'int64', 'rotary: arange(0, dim, 2)');
    const stepsFloat = cuda.empty(half, 'float32', 'rotary: arange(0, dim, 2).float()');
    cuda.release(steps);
    const shape = cuda.empty(half, 'float32', 'rotary: inv_freq_shape');
    cuda.release(stepsFloat);
    const power = cuda.empty(half, 'float32', 'rotary: base ** inv_freq_shape');
    cuda.release(cuda.empty([], 'float64', 'rotary: base as a tensor')); // pow(Scalar, Tensor) wraps its base
    const scaled = cuda.empty(half, 'float32', 'rotary: ext_factors * base ** inv_freq_shape');
    cuda.release(power);
    const reciprocal = cuda.empty(half, 'float32', 'rotary: reciprocal'); // Tensor.__rdiv__: reciprocal() * 1.0
    const long = cuda.empty(half, 'float32', 'model.rotary_emb.inv_freq (long factors)', 'parameter');
    for (const x of [reciprocal, scaled, extFactors, shape]) cuda.release(x);
    buffers.set(name, long);
    cuda.release(previous);
  } else {
    const short = buffers.get('model.rotary_emb.original_inv_freq')!;
    if (previous.impl !== short.impl) {
      buffers.set(name, cuda.ref(short));
      cuda.release(previous);
    }
  }
  cuda.release(seqLen);
}
