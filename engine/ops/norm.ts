/**
 * Normalizations (`aten/src/ATen/native/cuda/layer_norm_kernel.cu`, `layer_norm.cpp`).
 * layer_norm: output, then mean and rstd of shape [rows] in the accumulation dtype (fp32 for half types);
 * NativeLayerNormBackward0 saves input, weight, bias, mean and rstd; backward allocates dX, dgamma, dbeta.
 * nn.RMSNorm: `_fused_rms_norm`: output then rstd [rows] fp32; saves input, weight and rstd; backward dX, dgamma.
 */
import { accType } from '../tensor/dtype.ts';
import type { Tensor } from '../tensor/tensor.ts';
import type { Runtime } from './runtime.ts';

export function layerNorm(rt: Runtime, x: Tensor, weight: Tensor, bias: Tensor | null, label: string): Tensor {
  const { cuda, autograd } = rt;
  const rows = x.numel / x.shape[x.shape.length - 1]!;
  const out = cuda.empty(x.shape, x.dtype, label, 'activation');
  const mean = cuda.empty([rows], accType(x.dtype), `${label} mean`, 'activation');
  const rstd = cuda.empty([rows], accType(x.dtype), `${label} rstd`, 'activation');
  const needs = autograd.needsGrad([x, weight, bias]);
  const saved = needs ? [cuda.ref(x), cuda.ref(mean), cuda.ref(rstd)] : [];
  cuda.release(mean);
  cuda.release(rstd);
  autograd.record('NativeLayerNormBackward0', [x, weight, bias], [out], saved, ([grad]) => {
    if (!grad) return [null, null, null];
    const dx = autograd.needsGrad([x]) ? cuda.empty(x.shape, grad.dtype, `grad of ${label} input`) : null;
    const dw = cuda.empty(weight.shape, weight.dtype, `grad of ${label} weight`);
    const db = bias ? cuda.empty(bias.shape, bias.dtype, `grad of ${label} bias`) : null;
    return [dx, dw, db];
  });
  return out;
}

export function rmsNorm(rt: Runtime, x: Tensor, weight: Tensor, label: string): Tensor {
  const { cuda, autograd } = rt;
  const rows = x.numel / x.shape[x.shape.length - 1]!;
  const out = cuda.empty(x.shape, x.dtype, label, 'activation');
  const rstd = cuda.empty([rows], accType(x.dtype), `${label} rstd`, 'activation');
  const saved = autograd.needsGrad([x, weight]) ? [cuda.ref(x), cuda.ref(rstd)] : [];
  cuda.release(rstd);
  autograd.record('FusedRmsNormBackward0', [x, weight], [out], saved, ([grad]) => {
    if (!grad) return [null, null];
    const dx = autograd.needsGrad([x]) ? cuda.empty(x.shape, grad.dtype, `grad of ${label} input`) : null;
    const dw = cuda.empty(weight.shape, weight.dtype, `grad of ${label} weight`);
    return [dx, dw];
  });
  return out;
}
