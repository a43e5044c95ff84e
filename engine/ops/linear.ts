/**
 * `F.linear` on CUDA (`aten/src/ATen/native/Linear.cpp`): with a bias, `addmm(bias, x.view(-1, in), weight.t())`
 * through cuBLASLt's fused-bias GEMM (its own workspace), without one `matmul`. Measured on the H100: the output
 * is allocated before the GEMM's workspace.
 * AddmmBackward0 (derivatives.yaml): saves mat1 (the input) when the weight needs a gradient and mat2 (the
 * weight) when the input does; computes grad_input = grad @ weight, then grad_weight = grad^T @ input; the
 * bias gets `grad` itself, which the engine sums to [out_features].
 */
import type { Tensor } from '../tensor/tensor.ts';
import { castLower } from './autocast.ts';
import { matmul, mm } from './matmul.ts';
import type { Runtime } from './runtime.ts';

/** `F.linear(x, weight, bias)`; under autocast on its (cast) arguments. */
export function linear(rt: Runtime, x: Tensor, weight: Tensor, bias: Tensor | null, label: string): Tensor {
  if (!rt.autocast) return linearImpl(rt, x, weight, bias, label);
  const [xc, wc, bc] = castLower(rt, [x, weight, bias], [`${label} input`, `${label} weight`, `${label} bias`]);
  const out = linearImpl(rt, xc!, wc!, bc ?? null, label);
  for (const t of [xc, wc, bc]) rt.cuda.release(t);
  return out;
}

function linearImpl(rt: Runtime, x: Tensor, weight: Tensor, bias: Tensor | null, label: string): Tensor {
  const { cuda, autograd } = rt;
  const outFeatures = weight.shape[0]!;
  const inFeatures = weight.shape[1]!;
  if (!bias) {
    // `at::matmul(input, weight.t())`: folded into one mm for a batched input.
    const weightT = autograd.view('TBackward0', weight, [inFeatures, outFeatures]);
    const out = x.shape.length === 2 ? mm(rt, x, weightT, label) : matmul(rt, x, weightT, { aContiguous: true, bContiguous: true }, label);
    cuda.release(weightT);
    return out;
  }
  // addmm(bias, x2d, weight.t()): GCC evaluates the arguments right to left, so t() comes before the flatten.
  const weightT = autograd.view('TBackward0', weight, [inFeatures, outFeatures]);
  const flat = x.shape.length !== 2;
  // `_flatten_nd_linear`: input.view(-1, in) then the result viewed back (no copies).
  const x2d = flat ? autograd.view('ViewBackward0', x, [x.numel / inFeatures, inFeatures]) : x;
  const out2d = addmm(rt, bias, x2d, weightT, label);
  cuda.release(weightT);
  if (!flat) return out2d;
  cuda.release(x2d);
  // its gradient reshaped back for the mm: a copy when it arrives in another memory order (a ViT's residual stream)
  const out = autograd.view('ViewBackward0', out2d, [...x.shape.slice(0, -1), outFeatures], `grad of ${label} (reshaped)`);
  cuda.release(out2d);
  return out;
}

/**
 * transformers' `Conv1D` (GPT-2): `torch.addmm(bias, x.view(-1, nx), weight).view(size_out)`, the weight stored
 * as [in, out]. Under autocast addmm's arguments are cast right to left: weight, input, bias.
 */
export function conv1d(rt: Runtime, x: Tensor, weight: Tensor, bias: Tensor, label: string): Tensor {
  const { cuda, autograd } = rt;
  const inFeatures = weight.shape[0]!;
  const outFeatures = weight.shape[1]!;
  const x2d = autograd.view('ViewBackward0', x, [x.numel / inFeatures, inFeatures]);
  const [bc, xc, wc] = rt.autocast ? castLower(rt, [bias, x2d, weight], [`${label} bias`, `${label} input`, `${label} weight`]) : [cuda.ref(bias), cuda.ref(x2d), cuda.ref(weight)];
  const out2d = addmm(rt, bc!, xc!, wc!, label);
  for (const t of [xc, wc, bc]) cuda.release(t);
  cuda.release(x2d);
  // its gradient reshaped back for the mm: a copy when it arrives in another memory order
  const out = autograd.view('ViewBackward0', out2d, [...x.shape.slice(0, -1), outFeatures], `grad of ${label} (reshaped)`);
  cuda.release(out2d);
  return out;
}

/** `addmm(bias, mat1, mat2)`: the GEMM and AddmmBackward0. */
function addmm(rt: Runtime, bias: Tensor | null, x: Tensor, weightT: Tensor, label: string): Tensor {
  const { cuda, autograd } = rt;
  const xNeedsGrad = autograd.needsGrad([x]);
  const wNeedsGrad = autograd.needsGrad([weightT]);
  const toSave: Tensor[] = [];
  if (wNeedsGrad) toSave.push(x); // mat1, for grad_weight
  if (xNeedsGrad) toSave.push(weightT); // mat2, for grad_input (under autocast: the cast weight)
  const saved = autograd.saveInputs(true, toSave);
  const out = cuda.empty([x.shape[0]!, weightT.shape[1]!], x.dtype, label, 'activation');
  cuda.gemm(bias ? 'cublaslt' : 'cublas');
  // addmm(self=bias, mat1=input, mat2=weight.t()): the edges in that order.
  autograd.record('AddmmBackward0', [bias, x, weightT], [out], saved, ([grad]) => {
    if (!grad) return [null, null, null];
    let gradInput: Tensor | null = null;
    if (xNeedsGrad) {
      gradInput = cuda.empty(x.shape, grad.dtype, `grad of ${label} input`);
      cuda.gemm('cublas');
    }
    let gradWeight: Tensor | null = null;
    if (wNeedsGrad) {
      gradWeight = cuda.empty(weightT.shape, grad.dtype, `grad of ${label} weight`);
      cuda.gemm('cublas');
    }
    return [bias ? cuda.ref(grad) : null, gradInput, gradWeight];
  });
  return out;
}
