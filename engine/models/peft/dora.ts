/**
 * DoRA as PEFT 0.21 runs it (`LoraConfig(use_dora=True)`: peft/tuners/lora/variants.py `DoraLinearVariant.forward`,
 * peft/tuners/lora/dora.py `DoraLinearLayer`), for memory. A DoRA layer is a LoRA layer with one more trainable
 * vector, `lora_magnitude_vector.default.weight` ([out], fp32 as PEFT upcasts adapters), and a forward that adds,
 * on top of the base layer's output:
 * - `get_lora_weight`: `lora_B(lora_A(torch.eye(in)))` transposed, the adapter's [out, in] product, made through
 *   the layers (its x_eye in lora_A's dtype), then `.to(x.dtype)`;
 * - the base weight `.to(x.dtype)`, and `get_weight_norm`: `weight + scaling * lora_weight.detach()`, its L2 norm
 *   per output row (torch.linalg.norm(dim=1)), detached;
 * - `mag_norm_scale = (magnitude / weight_norm).view(1, -1)`, `lora_result = lora_B(lora_A(x))`;
 * - the base output again: with a dropout (not nn.Identity) `F.linear(x, weight)` on the dropped input, else the
 *   base layer's result (less its bias when it has one);
 * - `(mag_norm_scale - 1) * base_result + mag_norm_scale * lora_result * scaling`, then the LoRA layer's
 *   `result + that` and `.to(result dtype)`.
 * The adapter's product is computed with gradients on but reaches no loss: its graph (what lora_A and lora_B saved)
 * dies with `lora_weight` as the forward returns, the graph's nodes before the tensor's storage (a TensorImpl drops
 * its autograd meta before its storage).
 */
import { StopRecomputation, type Node } from '../../autograd/engine.ts';
import { addScalar, addTensors, mul, mulScalar, promote, toDType } from '../../ops/elementwise.ts';
import { linear } from '../../ops/linear.ts';
import { dropout } from '../../ops/pointwise.ts';
import type { Runtime } from '../../ops/runtime.ts';
import type { Tensor } from '../../tensor/tensor.ts';

/** The tensors of a DoRA layer. */
export interface DoraWeights {
  readonly weight: Tensor;
  readonly bias: Tensor | null;
  readonly a: Tensor;
  readonly b: Tensor;
  readonly magnitude: Tensor;
}

/**
 * `lora.Linear.forward` with DoRA once the base layer made `result`: `x` stays the caller's, `result` is consumed.
 * Frees follow Python's: each temporary once consumed, each frame's locals as it returns.
 */
export function doraForward(rt: Runtime, x: Tensor, result: Tensor, w: DoraWeights, dropoutP: number, label: string): Tensor {
  const { cuda } = rt;
  const resultDType = result.dtype;
  // Linear.forward: `x = self._cast_input_dtype(x, lora_A.weight.dtype)`
  const xc = toDType(rt, x, w.a.dtype, `${label} x.to(lora_A dtype)`);
  // DoraLinearVariant.forward: nn.Identity keeps the base result; a dropout drops x, and the base output is made again
  const identity = dropoutP === 0;
  const xd = identity ? cuda.ref(xc) : dropout(rt, xc, dropoutP, `${label}.lora_dropout`);
  const dora = doraLayer(rt, xd, identity ? result : null, w, label);
  // variant: `result = result + dora(...)`; the returned temporary dies, then the variant's locals (x)
  const sum = addTensors(rt, result, dora, `${label} result + DoRA`);
  cuda.release(dora);
  cuda.release(xd);
  // Linear.forward rebinds result (the base layer's output dies unless saved), then `.to(torch_result_dtype)`
  cuda.release(result);
  const out = toDType(rt, sum, resultDType, `${label} result.to(${resultDType})`);
  cuda.release(sum);
  cuda.release(xc);
  return out;
}

/** `DoraLinearLayer.forward(x, ..., base_result)`: the DoRA term (a new tensor); `baseResult` stays the caller's. */
function doraLayer(rt: Runtime, x: Tensor, baseResult: Tensor | null, w: DoraWeights, label: string): Tensor {
  const { autograd } = rt;
  const deadBranch = { from: autograd.recomputedCount(), to: null as number | null };
  // a recomputation that stops early (all its holders filled) unwinds this frame: the adapter product's recomputed
  // graph dies with lora_weight, what it saved too (Note [Replayed steps]: a frame that frees memory on unwinding)
  if (deadBranch.from === null) return doraTerm(rt, x, baseResult, w, label, deadBranch);
  rt.cuda.unwindingFrames++;
  try {
    return doraTerm(rt, x, baseResult, w, label, deadBranch);
  } catch (error) {
    if (error instanceof StopRecomputation && deadBranch.to !== null) autograd.dropRecomputed(deadBranch.from, deadBranch.to);
    throw error;
  } finally {
    rt.cuda.unwindingFrames--;
  }
}

function doraTerm(rt: Runtime, x: Tensor, baseResult: Tensor | null, w: DoraWeights, label: string, deadBranch: { from: number | null; to: number | null }): Tensor {
  const { cuda, autograd } = rt;
  // an nn.Linear's [out, in] weight (GPT-2's Conv1D, whose weight PEFT transposes into a new Parameter, is refused)
  const [outFeatures, inFeatures] = w.weight.shape as [number, number];
  // get_lora_weight: x_eye, lora_B(lora_A(x_eye)).T; x_eye dies as it returns
  const firstNode = autograd.peekSequenceNr();
  const eye = cuda.empty([inFeatures, inFeatures], w.a.dtype, `${label} DoRA torch.eye(in)`, 'activation');
  const eyeA = linear(rt, eye, w.a, null, `${label}.lora_A(x_eye)`);
  const eyeB = linear(rt, eyeA, w.b, null, `${label}.lora_B(x_eye)`);
  cuda.release(eyeA);
  const productT = autograd.view('PermuteBackward0', eyeB, [outFeatures, inFeatures]);
  cuda.release(eyeB);
  cuda.release(eye);
  // `lora_weight = lora_weight.to(x.dtype)`: the view dies when rebound
  const loraWeight = toDType(rt, productT, x.dtype, `${label} DoRA lora_weight.to(x dtype)`);
  cuda.release(productT);
  deadBranch.to = autograd.recomputedCount();
  // `weight = dequantize_module_weight(base_layer).to(x.dtype)`
  const weight = toDType(rt, w.weight, x.dtype, `${label} DoRA weight.to(x dtype)`);
  const weightNorm = weightNormOf(rt, weight, loraWeight, outFeatures, label);
  // `mag_norm_scale = (magnitude / weight_norm).view(1, -1)`
  const quotient = div(rt, w.magnitude, weightNorm, `${label} DoRA magnitude / weight_norm`);
  const magNormScale = autograd.view('ViewBackward0', quotient, [1, outFeatures]);
  cuda.release(quotient);
  // lora_result = lora_B(lora_A(x))
  const a = linear(rt, x, w.a, null, `${label}.lora_A`);
  const loraResult = linear(rt, a, w.b, null, `${label}.lora_B`);
  cuda.release(a);
  let base: Tensor;
  if (baseResult) base = w.bias ? addTensors(rt, baseResult, w.bias, `${label} DoRA base_result - bias`) : cuda.ref(baseResult);
  else base = linear(rt, x, weight, null, `${label} DoRA F.linear(x, weight)`);
  // (mag_norm_scale - 1) * base_result + mag_norm_scale * lora_result * scaling
  const scaleLess1 = addScalar(rt, magNormScale, `${label} DoRA mag_norm_scale - 1`);
  const first = mul(rt, scaleLess1, base, `${label} DoRA (mag_norm_scale - 1) * base_result`);
  cuda.release(scaleLess1);
  const second0 = mul(rt, magNormScale, loraResult, `${label} DoRA mag_norm_scale * lora_result`);
  const second = mulScalar(rt, second0, `${label} DoRA * scaling`);
  cuda.release(second0);
  const term = addTensors(rt, first, second, `${label} DoRA result_dora`);
  cuda.release(first);
  cuda.release(second);
  // the frame's locals, in the order Python made them: base_result, lora_weight (its graph first, then its storage),
  // weight, weight_norm, mag_norm_scale, lora_result
  cuda.release(base);
  dropGraph(loraWeight.gradFn, firstNode);
  if (deadBranch.from !== null && deadBranch.to !== null) autograd.dropRecomputed(deadBranch.from, deadBranch.to);
  deadBranch.to = null;
  cuda.release(loraWeight);
  cuda.release(weight);
  cuda.release(weightNorm);
  cuda.release(magNormScale);
  cuda.release(loraResult);
  return term;
}

/**
 * `get_weight_norm(weight, lora_weight.detach(), scaling)`: `weight + scaling * lora_weight`, its norm per output
 * row; nothing needs a gradient. The sum dies as it returns; the norm is returned detached.
 */
function weightNormOf(rt: Runtime, weight: Tensor, loraWeight: Tensor, outFeatures: number, label: string): Tensor {
  const { cuda } = rt;
  const detached = cuda.view(loraWeight);
  const scaled = cuda.empty(detached.shape, detached.dtype, `${label} DoRA scaling * lora_weight`, 'activation');
  const sum = cuda.empty(weight.shape, promote(weight.dtype, scaled.dtype), `${label} DoRA weight + scaling * lora_weight`, 'activation');
  cuda.release(scaled);
  const norm = cuda.empty([outFeatures], sum.dtype, `${label} DoRA weight_norm`, 'activation');
  cuda.release(sum);
  cuda.release(detached);
  return norm;
}

/** `self / other` where only self needs a gradient (DivBackward0 then saves other): the gradient `grad / other`. */
function div(rt: Runtime, self: Tensor, other: Tensor, label: string): Tensor {
  const { cuda, autograd } = rt;
  const saved = autograd.saveInputs(autograd.needsGrad([self]), [other]);
  const out = cuda.empty(self.shape, promote(self.dtype, other.dtype), label, 'activation');
  autograd.record('DivBackward0', [self, other], [out], saved, ([grad]) => [grad ? cuda.empty(self.shape, grad.dtype, `grad of ${label}`) : null, null]);
  return out;
}

/**
 * The graph of a tensor that dies without reaching a loss: its nodes made since `firstNode` (the cached casts of
 * the adapter's weights and the parameters' nodes are older, and live on), each dropping what it saved, the node
 * before those it leads to.
 */
function dropGraph(node: Node | null, firstNode: number): void {
  if (!node || node.seq < firstNode) return;
  node.releaseVariables();
  for (const edge of node.next) dropGraph(edge?.node ?? null, firstNode);
}

