/**
 * Pieces every Hugging Face model here shares (transformers 5.x): `ACT2FN` activations, the causal-LM loss
 * (`loss/loss_utils.py` ForCausalLMLoss), and the model's inputs as memplan's measurement script makes them
 * (`torch.randint(vocab, (B, T))`, used as `input_ids` and `labels`).
 */
import { crossEntropy } from '../../ops/loss.ts';
import { activation as pointwiseActivation } from '../../ops/pointwise.ts';
import { addScalar, addTensors, mul, mulScalar, powScalar, tanh, toDType } from '../../ops/elementwise.ts';
import { copy } from '../../ops/matmul.ts';
import type { Runtime } from '../../ops/runtime.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type { HfActivation } from './config.ts';

/**
 * `ACT2FN[name](x)`. gelu/relu/silu and gelu_pytorch_tanh are one kernel each; gelu_new is NewGELUActivation's
 * Python composite `0.5 * x * (1.0 + tanh(sqrt(2/pi) * (x + 0.044715 * pow(x, 3.0))))`, evaluated left to right
 * with each intermediate freed as soon as the next op consumed it (pow is on autocast's fp32 list, so under
 * autocast the rest runs in fp32).
 */
export function hfActivation(rt: Runtime, kind: HfActivation, x: Tensor, label: string): Tensor {
  switch (kind) {
    case 'gelu':
    case 'gelu_pytorch_tanh':
      return pointwiseActivation(rt, 'gelu', x, label);
    case 'relu':
      return pointwiseActivation(rt, 'relu', x, label);
    case 'silu':
      return pointwiseActivation(rt, 'silu', x, label);
    case 'gelu_new':
      return geluNew(rt, x, label);
  }
}

function geluNew(rt: Runtime, x: Tensor, label: string): Tensor {
  const { cuda } = rt;
  const half = mulScalar(rt, x, `${label}: 0.5 * x`);
  const cube = powScalar(rt, x, 3, `${label}: pow(x, 3)`);
  const scaledCube = mulScalar(rt, cube, `${label}: 0.044715 * x^3`);
  cuda.release(cube);
  const inner = addTensors(rt, x, scaledCube, `${label}: x + 0.044715 * x^3`);
  cuda.release(scaledCube);
  const scaled = mulScalar(rt, inner, `${label}: sqrt(2/pi) * (...)`);
  cuda.release(inner);
  const t = tanh(rt, scaled, `${label}: tanh`);
  cuda.release(scaled);
  const onePlus = addScalar(rt, t, `${label}: 1 + tanh`);
  cuda.release(t);
  const out = mul(rt, half, onePlus, label);
  cuda.release(onePlus);
  cuda.release(half);
  return out;
}

/**
 * ForCausalLMLoss with `labels = input_ids`: `logits.float()`; labels padded with -100 to [B, T+1]; the shifted
 * labels made contiguous ([B, T]: a copy unless B is 1); `cross_entropy(logits.view(-1, V), shift_labels.view(-1), ignore_index=-100)`.
 * The fp32 logits and the padded labels are locals that die when it returns.
 */
export function causalLmLoss(rt: Runtime, logits: Tensor, ids: Tensor): Tensor {
  const { cuda, autograd } = rt;
  const [b, t, v] = logits.shape as [number, number, number];
  const upcast = toDType(rt, logits, 'float32', 'logits.float()');
  const padded = cuda.empty([b, t + 1], 'int64', 'labels padded with -100', 'input');
  // `labels[..., 1:].contiguous()`: with one sequence the slice is contiguous already (a size-1 dimension's
  // stride does not count), a view (measured: phi3_4l_amp_bf16_s2048_window_efficient)
  const shifted = b === 1 ? cuda.view(padded, [b, t]) : copy(rt, padded, [b, t], 'shift_labels');
  const flat = autograd.view('ViewBackward0', upcast, [b * t, v]);
  const loss = crossEntropy(rt, flat, shifted);
  cuda.release(flat);
  cuda.release(shifted);
  cuda.release(padded);
  cuda.release(upcast);
  return loss;
}

/** One micro-batch: `torch.randint(vocab, (B, T))`, used as input_ids and labels. */
export function tokenInputs(rt: Runtime, batch: number, seqLen: number): Tensor[] {
  return [rt.cuda.empty([batch, seqLen], 'int64', 'input_ids', 'input')];
}

/** `position_ids = torch.arange(T) + past_seen_tokens` (a new tensor; the arange dies), then `unsqueeze(0)`. */
export function positionIds(rt: Runtime, seqLen: number): Tensor {
  const arange = rt.cuda.empty([seqLen], 'int64', 'arange(T)', 'input');
  const positions = rt.cuda.empty([1, seqLen], 'int64', 'position_ids', 'input');
  rt.cuda.release(arange);
  return positions;
}
