/**
 * `F.cross_entropy(logits, target)` = `nll_loss(log_softmax(logits, 1), target)`.
 * log_softmax allocates its output and saves it; nll_loss allocates the loss and total_weight (scalars of the
 * input's dtype) and saves the log-probabilities, target and total_weight. Backward: nll_loss allocates a
 * zero-filled [N, C] gradient, log_softmax_backward another [N, C].
 */
import { accType, DTYPE_BYTES } from '../tensor/dtype.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { castFp32 } from './autocast.ts';
import { promote } from './elementwise.ts';
import type { Runtime } from './runtime.ts';

export function logSoftmax(rt: Runtime, x: Tensor, label: string): Tensor {
  const { cuda, autograd } = rt;
  const out = cuda.empty(x.shape, x.dtype, label, 'activation');
  const saved = autograd.needsGrad([x]) ? [cuda.ref(out)] : [];
  autograd.record('LogSoftmaxBackward0', [x], [out], saved, ([grad]) => [grad ? cuda.empty(x.shape, grad.dtype, `grad of ${label}`) : null]);
  return out;
}

export function nllLoss(rt: Runtime, logProbs: Tensor, target: Tensor, label: string): Tensor {
  const { cuda, autograd } = rt;
  const needs = autograd.needsGrad([logProbs]);
  const savedInputs = autograd.saveInputs(needs, [logProbs, target]);
  const loss = cuda.empty([], logProbs.dtype, label, 'activation');
  const totalWeight = cuda.empty([], logProbs.dtype, `${label} total_weight`, 'activation');
  const saved = needs ? [...savedInputs, cuda.ref(totalWeight)] : [];
  cuda.release(totalWeight);
  autograd.record('NllLossBackward0', [logProbs], [loss], saved, ([grad]) => [grad ? cuda.empty(logProbs.shape, grad.dtype, `grad of ${label}`) : null]);
  return loss;
}

/**
 * `F.cross_entropy`. Under autocast (measured on the H100 with C++ stacks): log_softmax runs in the logits'
 * dtype, then nll_loss (on the fp32 list) casts the log-probabilities to fp32.
 */
export function crossEntropy(rt: Runtime, logits: Tensor, target: Tensor): Tensor {
  const logProbs = logSoftmax(rt, logits, 'log_softmax');
  const nllInput = castFp32(rt, logProbs, 'log_softmax');
  rt.cuda.release(logProbs);
  const loss = nllLoss(rt, nllInput, target, 'loss');
  rt.cuda.release(nllInput);
  return loss;
}

/** The CUDA reduction of `mean()` over all of x's elements: its staging buffer, when the launch splits, comes and goes. */
function meanInto(rt: Runtime, x: Tensor, label: string): void {
  rt.cuda.reduction({ numOutputs: 1, inputsPerOutput: x.numel, reduceFastest: true, elementBytes: DTYPE_BYTES[x.dtype], accumulateBytes: DTYPE_BYTES[accType(x.dtype)] }, label);
}

/**
 * `F.mse_loss(input, target)` (reduction mean; aten/src/ATen/native/Loss.cpp). A structured op: its meta function
 * allocates the output with the elementwise shape in TensorIterator's promoted dtype and resizes it to a scalar,
 * which keeps the storage; the impl writes the squared errors into a second such tensor and reduces it into the
 * output (`mean_out`), the temporary dying as it returns. On the autocast fp32 list. MseLossBackward0 saves input
 * and target and allocates `zeros_like(input)` (mse_loss_backward), whose TensorIterator requires every operand in
 * one dtype: a half-precision input with float32 labels throws there, so plans that would are refused before.
 */
export function mseLoss(rt: Runtime, input: Tensor, target: Tensor): Tensor {
  const { cuda, autograd } = rt;
  // the autocast wrapper evaluates its arguments right to left
  const y = castFp32(rt, target, 'labels');
  const x = castFp32(rt, input, 'mse_loss input');
  const dtype = promote(x.dtype, y.dtype);
  const saved = autograd.saveInputs(autograd.needsGrad([x]), [x, y]);
  const elementwise = cuda.empty(x.shape, dtype, 'loss', 'activation');
  const errors = cuda.empty(x.shape, dtype, 'mse_loss squared errors', 'temporary');
  meanInto(rt, errors, 'mse_loss mean');
  const loss = cuda.view(elementwise, []);
  cuda.release(elementwise);
  cuda.release(errors);
  autograd.record('MseLossBackward0', [x], [loss], saved, ([grad]) => [grad ? cuda.empty(x.shape, x.dtype, 'grad of mse_loss') : null]);
  cuda.release(x);
  cuda.release(y);
  return loss;
}

/**
 * `F.binary_cross_entropy_with_logits(input, target)` (no weights, reduction mean; Loss.cpp, one autograd node):
 * `log_sigmoid(input)` (its CUDA buffer is empty), the elementwise loss `(1 - target).mul_(input).sub_(...)` in
 * the target's dtype, then its mean (a new scalar); the elementwise loss dies first as it returns. On the autocast
 * fp32 list. Its backward allocates `sigmoid(input)` and works on it in place (without create_graph).
 */
export function bceWithLogitsLoss(rt: Runtime, input: Tensor, target: Tensor): Tensor {
  const { cuda, autograd } = rt;
  const y = castFp32(rt, target, 'labels');
  const x = castFp32(rt, input, 'binary_cross_entropy_with_logits input');
  const saved = autograd.saveInputs(autograd.needsGrad([x]), [x, y]);
  const logSigmoid = cuda.empty(x.shape, x.dtype, 'log_sigmoid(input)', 'temporary');
  const elementwise = cuda.empty(y.shape, y.dtype, '(1 - target) * input - log_sigmoid(input)', 'temporary');
  const loss = cuda.empty([], y.dtype, 'loss', 'activation');
  meanInto(rt, elementwise, 'binary_cross_entropy_with_logits mean');
  cuda.release(elementwise);
  cuda.release(logSigmoid);
  autograd.record('BinaryCrossEntropyWithLogitsBackward0', [x], [loss], saved, ([grad]) => [grad ? cuda.empty(x.shape, x.dtype, 'grad of binary_cross_entropy_with_logits') : null]);
  cuda.release(x);
  cuda.release(y);
  return loss;
}
