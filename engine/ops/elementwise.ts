/**
 * Elementwise ops written out as PyTorch's composite functions call them (e.g. the rms_norm composite), each
 * with its derivatives.yaml backward. C++ temporaries live to the end of their full expression and die in
 * reverse order of creation, which the backward formulas below follow.
 */
import { DTYPE_BYTES, type DType } from '../tensor/dtype.ts';
import { elementwiseMemoryOrder, type Tensor } from '../tensor/tensor.ts';
import { castFp32 } from './autocast.ts';
import type { Runtime } from './runtime.ts';

/** Type promotion of two floating-point tensors (`c10::promoteTypes`): the wider wins; fp16 with bf16 is fp32. */
export function promote(a: DType, b: DType): DType {
  if (a === b) return a;
  if (a === 'float64' || b === 'float64') return 'float64';
  if (a === 'float32' || b === 'float32') return 'float32';
  if ((a === 'float16' && b === 'bfloat16') || (a === 'bfloat16' && b === 'float16')) return 'float32';
  return DTYPE_BYTES[a] >= DTYPE_BYTES[b] ? a : b;
}

/**
 * The shape two operands broadcast to. Most often one of them has it already: that operand's own shape array is
 * returned then (shapes are never changed once made), sparing an array per elementwise op.
 */
export function broadcastShape(a: readonly number[], b: readonly number[]): readonly number[] {
  const n = Math.max(a.length, b.length);
  let isA = a.length === n;
  let isB = b.length === n;
  for (let i = 1; i <= n && (isA || isB); i++) {
    const da = a[a.length - i] ?? 1;
    const db = b[b.length - i] ?? 1;
    if (da < db) isA = false;
    else if (db < da) isB = false;
  }
  if (isA) return a;
  if (isB) return b;
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) out[i] = Math.max(a[a.length - n + i] ?? 1, b[b.length - n + i] ?? 1);
  return out;
}

/** `t.to(dtype)` (`_to_copy`): ToCopyBackward0 converts the gradient back. No copy when the dtype matches. */
export function toDType(rt: Runtime, t: Tensor, dtype: DType, label: string): Tensor {
  const { cuda, autograd } = rt;
  if (t.dtype === dtype) return cuda.ref(t);
  const out = cuda.empty(t.shape, dtype, label, 'activation');
  autograd.record('ToCopyBackward0', [t], [out], [], ([grad]) => [grad ? cuda.empty(t.shape, t.dtype, `grad of ${label}`) : null]);
  return out;
}

/** `self.pow(2)`. */
export function square(rt: Runtime, self: Tensor, label: string): Tensor {
  return powScalar(rt, self, 2, label);
}

/**
 * `self.pow(exponent)` (a scalar exponent): PowBackward0 saves self; backward `grad * (exponent *
 * self.pow(exponent - 1))`, three full-size results, the two temporaries dying at the end of the expression.
 * On autocast's fp32 list: a lower-precision input is cast to fp32 first.
 */
export function powScalar(rt: Runtime, self: Tensor, exponent: number, label: string): Tensor {
  const { cuda, autograd } = rt;
  const input = rt.autocast ? castFp32(rt, self, label) : self;
  const saved = autograd.saveInputs(autograd.needsGrad([input]), [input]);
  const out = cuda.empty(input.shape, input.dtype, label, 'activation');
  autograd.record('PowBackward0', [input], [out], saved, ([grad]) => {
    if (!grad) return [null];
    const pow1 = cuda.empty(input.shape, input.dtype, `${label} backward: self.pow(${exponent - 1})`);
    const times = cuda.empty(input.shape, input.dtype, `${label} backward: ${exponent} * self.pow(${exponent - 1})`);
    const result = cuda.empty(broadcastShape(grad.shape, input.shape), promote(grad.dtype, input.dtype), `grad of ${label}`);
    cuda.release(times);
    cuda.release(pow1);
    return [result];
  });
  if (input !== self) cuda.release(input);
  return out;
}

/** `self.mean(-1, keepdim=True)`: MeanBackward1 saves only sizes; backward `grad.expand(sizes) / n` is full size. */
export function meanLastDim(rt: Runtime, self: Tensor, label: string): Tensor {
  const { cuda, autograd } = rt;
  const shape = [...self.shape.slice(0, -1), 1];
  const out = cuda.empty(shape, self.dtype, label, 'activation');
  autograd.record('MeanBackward1', [self], [out], [], ([grad]) => [grad ? cuda.empty(self.shape, grad.dtype, `grad of ${label}`) : null]);
  return out;
}

/** `t.add_(scalar)`, in place: AddBackward0 passes the gradient through. Returns a new reference to t. */
export function addScalarInPlace(rt: Runtime, t: Tensor): Tensor {
  const { cuda, autograd } = rt;
  const out = cuda.ref(t);
  autograd.record('AddBackward1', [t], [out], [], ([grad]) => [grad ? cuda.ref(grad) : null]);
  return out;
}

/** `rsqrt(self)`: saves its result; backward `-0.5 * grad * result.pow(3)`. */
export function rsqrt(rt: Runtime, self: Tensor, label: string): Tensor {
  const { cuda, autograd } = rt;
  const out = cuda.empty(self.shape, self.dtype, label, 'activation');
  const saved = autograd.needsGrad([self]) ? [cuda.ref(out)] : [];
  autograd.record('RsqrtBackward0', [self], [out], saved, ([grad]) => {
    if (!grad) return [null];
    const scaled = cuda.empty(grad.shape, grad.dtype, `${label} backward: -0.5 * grad`);
    const cubed = cuda.empty(self.shape, self.dtype, `${label} backward: result.pow(3)`);
    const result = cuda.empty(self.shape, grad.dtype, `grad of ${label}`);
    cuda.release(cubed);
    cuda.release(scaled);
    return [result];
  });
  return out;
}

/**
 * `self * other` (broadcasting): MulBackward0 saves other for self's gradient and self for other's.
 * Backward computes other's gradient (`grad * self`) before self's (`grad * other`): measured on the H100
 * (the one of other's shape is the one the engine then sums to it).
 */
export function mul(rt: Runtime, self: Tensor, other: Tensor, label: string): Tensor {
  const { cuda, autograd } = rt;
  const shape = broadcastShape(self.shape, other.shape);
  const dtype = promote(self.dtype, other.dtype);
  const selfNeeds = autograd.needsGrad([self]);
  const otherNeeds = autograd.needsGrad([other]);
  const toSave: Tensor[] = [];
  if (otherNeeds) toSave.push(self);
  if (selfNeeds) toSave.push(other);
  const saved = autograd.saveInputs(true, toSave);
  const out = cuda.empty(shape, dtype, label, 'activation');
  autograd.record('MulBackward0', [self, other], [out], saved, ([grad]) => {
    if (!grad) return [null, null];
    // mul_tensor_backward: grad * self (other's), grad * other (self's), in their promoted dtype; the engine then
    // sums each to its input's shape and converts it to its input's dtype.
    const gOther = otherNeeds ? cuda.empty(broadcastShape(grad.shape, self.shape), promote(grad.dtype, self.dtype), `grad of ${label} (other)`) : null;
    const gSelf = selfNeeds ? cuda.empty(broadcastShape(grad.shape, other.shape), promote(grad.dtype, other.dtype), `grad of ${label} (self)`) : null;
    return [gSelf, gOther];
  });
  return out;
}

/**
 * `a + b` (broadcasting, mixed dtypes: the result in the promoted dtype). AddBackward0 saves nothing and hands
 * `grad` to both; the engine sums it to each input's shape and converts it to each input's dtype.
 */
export function addTensors(rt: Runtime, a: Tensor, b: Tensor, label: string): Tensor {
  const { cuda, autograd } = rt;
  const out = cuda.empty(broadcastShape(a.shape, b.shape), promote(a.dtype, b.dtype), label, 'activation');
  // laid out by TensorIterator from its operands (nn.MultiheadAttention's transposed output first: `x + input` and
  // every residual sum after it are [L, B, E] in memory)
  out.impl.memoryOrder = elementwiseMemoryOrder(out.shape, [a, b]);
  autograd.record('AddBackward0', [a, b], [out], [], ([grad]) => (grad ? [cuda.ref(grad), cuda.ref(grad)] : [null, null]));
  return out;
}

/** `t * scalar` (or `scalar * t`): MulBackward1 saves nothing; backward allocates `grad * scalar`. */
export function mulScalar(rt: Runtime, t: Tensor, label: string): Tensor {
  const { cuda, autograd } = rt;
  const out = cuda.empty(t.shape, t.dtype, label, 'activation');
  autograd.record('MulBackward1', [t], [out], [], ([grad]) => [grad ? cuda.empty(grad.shape, grad.dtype, `grad of ${label}`) : null]);
  return out;
}

/** `t + scalar` (or `scalar + t`): AddBackward1 passes the gradient on. */
export function addScalar(rt: Runtime, t: Tensor, label: string): Tensor {
  const { cuda, autograd } = rt;
  const out = cuda.empty(t.shape, t.dtype, label, 'activation');
  autograd.record('AddBackward1', [t], [out], [], ([grad]) => [grad ? cuda.ref(grad) : null]);
  return out;
}

/** `-t`: NegBackward0 allocates `-grad`. */
export function neg(rt: Runtime, t: Tensor, label: string): Tensor {
  const { cuda, autograd } = rt;
  const out = cuda.empty(t.shape, t.dtype, label, 'activation');
  autograd.record('NegBackward0', [t], [out], [], ([grad]) => [grad ? cuda.empty(grad.shape, grad.dtype, `grad of ${label}`) : null]);
  return out;
}

/** `torch.tanh(t)`: saves its result; backward `tanh_backward(grad, result)`. */
export function tanh(rt: Runtime, t: Tensor, label: string): Tensor {
  const { cuda, autograd } = rt;
  const out = cuda.empty(t.shape, t.dtype, label, 'activation');
  const saved = autograd.needsGrad([t]) ? [cuda.ref(out)] : [];
  autograd.record('TanhBackward0', [t], [out], saved, ([grad]) => [grad ? cuda.empty(t.shape, grad.dtype, `grad of ${label}`) : null]);
  return out;
}

/**
 * `F.softmax(t, -1, dtype=...)` (aten/src/ATen/native/SoftMax.cpp `softmax`): asked for fp32, an fp16 CUDA input
 * is computed straight into an fp32 result (`_softmax(t, dim, half_to_float=true)`), any other input is first
 * converted (`t.toType(dtype)`, a copy that dies once the result exists). Autocast's fp32_set_opt_dtype policy
 * asks for fp32 when a half input comes without a dtype. SoftmaxBackward0 saves the result; its backward
 * allocates the input's gradient and a `grad * output` temporary (cuda/SoftMax.cu). Measured on the H100.
 */
export function softmax(rt: Runtime, t: Tensor, label: string, dtype?: DType): Tensor {
  const { cuda, autograd } = rt;
  const want = dtype ?? (rt.autocast && t.dtype !== 'float32' ? 'float32' : t.dtype);
  const halfToFloat = t.dtype === 'float16' && want === 'float32';
  const input = want === t.dtype || halfToFloat ? cuda.ref(t) : toDType(rt, t, want, `${label} input.toType(${want})`);
  const out = cuda.empty(t.shape, want, label, 'activation');
  const saved = autograd.needsGrad([input]) ? [cuda.ref(out)] : [];
  cuda.release(input); // `converted` dies with the lambda that made the result
  autograd.record('SoftmaxBackward0', [input], [out], saved, ([grad]) => {
    if (!grad) return [null];
    const gradInput = cuda.empty(input.shape, input.dtype, `grad of ${label}`);
    const tmp = cuda.empty(grad.shape, grad.dtype, `${label} backward: grad * output`);
    cuda.release(tmp);
    return [gradInput];
  });
  return out;
}

/**
 * `torch.cat(tensors, dim)`: one new contiguous tensor; CatBackward0 saves only sizes and hands each input a
 * slice (a view) of the gradient.
 */
export function cat(rt: Runtime, tensors: readonly Tensor[], shape: readonly number[], label: string, dtype: DType = tensors[0]!.dtype): Tensor {
  const { cuda, autograd } = rt;
  const out = cuda.empty(shape, dtype, label, 'activation');
  autograd.record('CatBackward0', tensors, [out], [], ([grad]) => tensors.map((t) => (grad ? cuda.view(grad, t.shape) : null)));
  return out;
}
