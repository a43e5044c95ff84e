/**
 * Pointwise ops. Each allocates one output the size of its input; its backward allocates one gradient.
 * What backward needs (derivatives.yaml): relu, tanh and sigmoid save their result; gelu and silu their input.
 */
import type { Tensor } from '../tensor/tensor.ts';
import type { Runtime } from './runtime.ts';

export type Activation = 'relu' | 'gelu' | 'silu' | 'tanh' | 'sigmoid';

const SAVES_RESULT: Record<Activation, boolean> = { relu: true, tanh: true, sigmoid: true, gelu: false, silu: false };
const NODE_NAME: Record<Activation, string> = {
  relu: 'ReluBackward0',
  gelu: 'GeluBackward0',
  silu: 'SiluBackward0',
  tanh: 'TanhBackward0',
  sigmoid: 'SigmoidBackward0',
};

export function activation(rt: Runtime, kind: Activation, x: Tensor, label: string): Tensor {
  const { cuda, autograd } = rt;
  const needs = autograd.needsGrad([x]);
  const savedInput = SAVES_RESULT[kind] ? [] : autograd.saveInputs(needs, [x]);
  const out = cuda.empty(x.shape, x.dtype, label, 'activation');
  const saved = SAVES_RESULT[kind] && needs ? [cuda.ref(out)] : savedInput;
  autograd.record(NODE_NAME[kind], [x], [out], saved, ([grad]) => [grad ? cuda.empty(x.shape, grad.dtype, `grad of ${label}`) : null]);
  return out;
}

/** `a + b` (same shapes): AddBackward0 hands the same gradient to both inputs and saves nothing. */
export function add(rt: Runtime, a: Tensor, b: Tensor, label: string): Tensor {
  const { cuda, autograd } = rt;
  const out = cuda.empty(a.shape, a.dtype, label, 'activation');
  autograd.record('AddBackward0', [a, b], [out], [], ([grad]) => (grad ? [cuda.ref(grad), cuda.ref(grad)] : [null, null]));
  return out;
}

/** `t / scalar`: DivBackward0 allocates grad / scalar. */
export function divScalar(rt: Runtime, t: Tensor, label: string): Tensor {
  const { cuda, autograd } = rt;
  const out = cuda.empty(t.shape, t.dtype, label, 'activation');
  autograd.record('DivBackward0', [t], [out], [], ([grad]) => [grad ? cuda.empty(t.shape, grad.dtype, `grad of ${label}`) : null]);
  return out;
}

/**
 * `F.dropout(x, p)` in training, 0 < p < 1: `native_dropout` makes a bool mask and the output (the mask
 * first, measured on the H100); NativeDropoutBackward0 saves only the mask.
 */
export function dropout(rt: Runtime, x: Tensor, p: number, label: string): Tensor {
  const { cuda, autograd } = rt;
  if (p === 0 || x.numel === 0) return cuda.ref(x);
  const mask = cuda.empty(x.shape, 'bool', `${label} mask`, 'activation');
  const out = cuda.empty(x.shape, x.dtype, label, 'activation');
  const saved = autograd.needsGrad([x]) ? [cuda.ref(mask)] : [];
  cuda.release(mask);
  autograd.record('NativeDropoutBackward0', [x], [out], saved, ([grad]) => [grad ? cuda.empty(x.shape, grad.dtype, `grad of ${label}`) : null]);
  return out;
}
