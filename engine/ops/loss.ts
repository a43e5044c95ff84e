/**
 * `F.cross_entropy(logits, target)` = `nll_loss(log_softmax(logits, 1), target)`.
 * log_softmax allocates its output and saves it; nll_loss allocates the loss and total_weight (scalars of the
 * input's dtype) and saves the log-probabilities, target and total_weight. Backward: nll_loss allocates a
 * zero-filled [N, C] gradient, log_softmax_backward another [N, C].
 */
import type { Tensor } from '../tensor/tensor.ts';
import { castFp32 } from './autocast.ts';
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
