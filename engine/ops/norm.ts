/**
 * Normalizations (`aten/src/ATen/native/cuda/layer_norm_kernel.cu`, `layer_norm.cpp`).
 * layer_norm: output, then mean and rstd of shape [rows] in the accumulation dtype (fp32 for half types);
 * NativeLayerNormBackward0 saves input, weight, bias, mean and rstd; backward allocates dX, dgamma, dbeta.
 * nn.RMSNorm: `_fused_rms_norm`: output then rstd [rows] fp32; saves input, weight and rstd; backward dX, dgamma.
 */
import { accType } from '../tensor/dtype.ts';
import { isContiguous, type Tensor } from '../tensor/tensor.ts';
import { castFp32 } from './autocast.ts';
import { addScalarInPlace, meanLastDim, mul, rsqrt, square, toDType } from './elementwise.ts';
import type { Runtime } from './runtime.ts';

/** `F.layer_norm`; autocast runs it in fp32 (its input cast if needed). */
export function layerNorm(rt: Runtime, x: Tensor, weight: Tensor, bias: Tensor | null, label: string): Tensor {
  if (!rt.autocast) return layerNormImpl(rt, x, weight, bias, label);
  const xc = castFp32(rt, x, `${label} input`);
  const out = layerNormImpl(rt, xc, weight, bias, label);
  rt.cuda.release(xc);
  return out;
}

/**
 * The kernel reads its input and the incoming gradient contiguous (`expect_contiguous`): one that is not, by its
 * memory order (TensorImpl.memoryOrder: a ViT's residual stream, the gradient of nn.MultiheadAttention's input), is
 * copied, the input in forward and again in backward.
 */
function layerNormImpl(rt: Runtime, x: Tensor, weight: Tensor, bias: Tensor | null, label: string): Tensor {
  const { cuda, autograd } = rt;
  const rows = x.numel / x.shape[x.shape.length - 1]!;
  const needs = autograd.needsGrad([x, weight, bias]);
  const savedInput = autograd.saveInputs(needs, [x]);
  const inputContiguous = isContiguous(x);
  const contiguousCopy = inputContiguous ? null : cuda.empty(x.shape, x.dtype, `${label} input.contiguous()`, 'temporary');
  const out = cuda.empty(x.shape, x.dtype, label, 'activation');
  const mean = cuda.empty([rows], accType(x.dtype), `${label} mean`, 'activation');
  const rstd = cuda.empty([rows], accType(x.dtype), `${label} rstd`, 'activation');
  const saved = needs ? [...savedInput, cuda.ref(mean), cuda.ref(rstd)] : [];
  cuda.release(mean);
  cuda.release(rstd);
  cuda.release(contiguousCopy);
  autograd.record('NativeLayerNormBackward0', [x, weight, bias], [out], saved, ([grad]) => {
    if (!grad) return [null, null, null];
    // layer_norm_backward_cuda: `X = input.expect_contiguous()`, dX, dgamma, dbeta, each only where
    // grad_input_mask asks for it (a frozen weight or bias gets none: measured with LoRA on GPT-2), then the
    // kernel's `dY.contiguous()` argument (measured order on the H100, ViT-B/16)
    const xCopy = inputContiguous ? null : cuda.empty(x.shape, x.dtype, `${label} backward: input.contiguous()`, 'temporary');
    const dx = autograd.needsGrad([x]) ? cuda.empty(x.shape, grad.dtype, `grad of ${label} input`) : null;
    const dw = autograd.needsGrad([weight]) ? cuda.empty(weight.shape, weight.dtype, `grad of ${label} weight`) : null;
    const db = bias && autograd.needsGrad([bias]) ? cuda.empty(bias.shape, bias.dtype, `grad of ${label} bias`) : null;
    const gCopy = isContiguous(grad) ? null : cuda.empty(grad.shape, grad.dtype, `${label} backward: grad.contiguous()`, 'temporary');
    cuda.release(gCopy);
    cuda.release(xCopy);
    return [dx, dw, db];
  });
  return out;
}

/**
 * `F.rms_norm` (nn.RMSNorm). `_fused_rms_norm` when the weight's dtype is the input's; otherwise (e.g. fp32
 * weights under autocast, where rms_norm is on no cast list) `rms_norm_composite` (layer_norm.cpp):
 * upcast, `rsqrt(pow(x, 2).mean(-1, keepdim).add_(eps))`, `x * rsqrt`, `* weight`, then, outside the dispatch
 * lambda that returns (result, rstd), `.type_as(input)`; each step with its own autograd node (measured on the
 * H100 under autocast bf16, with and without grad).
 */
export function rmsNorm(rt: Runtime, x: Tensor, weight: Tensor, label: string): Tensor {
  if (x.dtype !== weight.dtype) return rmsNormComposite(rt, x, weight, label);
  const { cuda, autograd } = rt;
  const rows = x.numel / x.shape[x.shape.length - 1]!;
  const needs = autograd.needsGrad([x, weight]);
  const savedInput = autograd.saveInputs(needs, [x]);
  const out = cuda.empty(x.shape, x.dtype, label, 'activation');
  const rstd = cuda.empty([rows], accType(x.dtype), `${label} rstd`, 'activation');
  const saved = needs ? [...savedInput, cuda.ref(rstd)] : [];
  cuda.release(rstd);
  autograd.record('FusedRmsNormBackward0', [x, weight], [out], saved, ([grad]) => {
    if (!grad) return [null, null];
    const dx = autograd.needsGrad([x]) ? cuda.empty(x.shape, grad.dtype, `grad of ${label} input`) : null;
    const dw = cuda.empty(weight.shape, weight.dtype, `grad of ${label} weight`);
    return [dx, dw];
  });
  return out;
}

function rmsNormComposite(rt: Runtime, x: Tensor, weight: Tensor, label: string): Tensor {
  const { cuda } = rt;
  const upcast = toDType(rt, x, accType(x.dtype), `${label} upcast`);
  const squared = square(rt, upcast, `${label} pow(2)`);
  const mean = meanLastDim(rt, squared, `${label} mean`);
  const meanEps = addScalarInPlace(rt, mean);
  const inv = rsqrt(rt, meanEps, `${label} rsqrt`);
  // the full expression ends: its temporaries die last-made first
  cuda.release(meanEps);
  cuda.release(mean);
  cuda.release(squared);
  const normed = mul(rt, upcast, inv, `${label} x * rsqrt`);
  const scaled = mul(rt, normed, weight, `${label} * weight`);
  cuda.release(normed); // `upcasted_result = upcasted_result.mul(weight)`
  cuda.release(upcast); // the dispatch lambda returns (result, rstd): its locals die
  const out = toDType(rt, scaled, x.dtype, label); // `std::get<0>(result).type_as(input)`
  cuda.release(scaled);
  cuda.release(inv);
  return out;
}
