/**
 * Elementwise ops written out as PyTorch's composite functions call them (e.g. the rms_norm composite), each
 * with its derivatives.yaml backward. C++ temporaries live to the end of their full expression and die in
 * reverse order of creation, which the backward formulas below follow.
 */
import type { DType } from '../tensor/dtype.ts';
import type { Tensor } from '../tensor/tensor.ts';
import type { Runtime } from './runtime.ts';

function broadcastShape(a: readonly number[], b: readonly number[]): number[] {
  const n = Math.max(a.length, b.length);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const da = a[a.length - n + i] ?? 1;
    const db = b[b.length - n + i] ?? 1;
    out.push(Math.max(da, db));
  }
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

/** `self.pow(2)`: PowBackward0 saves self; backward `grad * (2 * self.pow(1))`. */
export function square(rt: Runtime, self: Tensor, label: string): Tensor {
  const { cuda, autograd } = rt;
  const saved = autograd.saveInputs(autograd.needsGrad([self]), [self]);
  const out = cuda.empty(self.shape, self.dtype, label, 'activation');
  autograd.record('PowBackward0', [self], [out], saved, ([grad]) => {
    if (!grad) return [null];
    const pow1 = cuda.empty(self.shape, self.dtype, `${label} backward: self.pow(1)`);
    const times2 = cuda.empty(self.shape, self.dtype, `${label} backward: 2 * self.pow(1)`);
    const result = cuda.empty(broadcastShape(grad.shape, self.shape), grad.dtype, `grad of ${label}`);
    cuda.release(times2);
    cuda.release(pow1);
    return [result];
  });
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
  const dtype = self.dtype === 'float32' || other.dtype === 'float32' ? 'float32' : self.dtype;
  const selfNeeds = autograd.needsGrad([self]);
  const otherNeeds = autograd.needsGrad([other]);
  const toSave: Tensor[] = [];
  if (otherNeeds) toSave.push(self);
  if (selfNeeds) toSave.push(other);
  const saved = autograd.saveInputs(true, toSave);
  const out = cuda.empty(shape, dtype, label, 'activation');
  autograd.record('MulBackward0', [self, other], [out], saved, ([grad]) => {
    if (!grad) return [null, null];
    const gOther = otherNeeds ? cuda.empty(broadcastShape(grad.shape, self.shape), other.dtype, `grad of ${label} (other)`) : null;
    const gSelf = selfNeeds ? cuda.empty(broadcastShape(grad.shape, other.shape), self.dtype, `grad of ${label} (self)`) : null;
    return [gSelf, gOther];
  });
  return out;
}
