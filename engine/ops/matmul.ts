/**
 * Matrix products (`aten/src/ATen/native/LinearAlgebra.cpp` `_matmul_impl`; derivatives.yaml mm, bmm).
 * - mm/bmm allocate their output, then cuBLAS runs (its workspace on the thread's first GEMM).
 * - MmBackward0/BmmBackward0 save self for mat2's gradient and mat2 for self's. The generated backward computes
 *   the gradients in the alphabetical order of derivatives.yaml's keys (tools/autograd/load_derivatives.py sorts
 *   them): mat2's before self's, as mul's `other` before `self` and addmm's `mat1` before `mat2` (all measured
 *   on the H100).
 * - matmul folds a batched first argument into a matrix (`reshape(-1, k)`, a view of a contiguous tensor) when
 *   the second is a matrix, and otherwise expands and reshapes both to 3-d for bmm: a reshape of a tensor whose
 *   memory is not in that order is a copy (`clone` + `_unsafe_view`), which bmm then saves.
 */
import type { Tensor } from '../tensor/tensor.ts';
import { castLower } from './autocast.ts';
import type { Runtime } from './runtime.ts';

/** `torch.mm(a, b)`: [n, k] @ [k, m]. */
export function mm(rt: Runtime, a: Tensor, b: Tensor, label: string): Tensor {
  return product(rt, a, b, [a.shape[0]!, b.shape[1]!], 'MmBackward0', label);
}

/** `torch.bmm(a, b)`: [n, p, k] @ [n, k, m]. */
export function bmm(rt: Runtime, a: Tensor, b: Tensor, label: string): Tensor {
  return product(rt, a, b, [a.shape[0]!, a.shape[1]!, b.shape[2]!], 'BmmBackward0', label);
}

/** mm and bmm: the output, the GEMM; backward mat2's gradient, then self's, each with its GEMM. */
function product(rt: Runtime, a: Tensor, b: Tensor, outShape: number[], node: string, label: string): Tensor {
  const { cuda, autograd } = rt;
  const aNeeds = autograd.needsGrad([a]);
  const bNeeds = autograd.needsGrad([b]);
  const toSave: Tensor[] = [];
  if (bNeeds) toSave.push(a);
  if (aNeeds) toSave.push(b);
  const saved = autograd.saveInputs(true, toSave);
  const out = cuda.empty(outShape, a.dtype, label, 'activation');
  cuda.gemm('cublas');
  autograd.record(node, [a, b], [out], saved, ([grad]) => {
    if (!grad) return [null, null];
    let gb: Tensor | null = null;
    let ga: Tensor | null = null;
    if (bNeeds) {
      gb = cuda.empty(b.shape, grad.dtype, `grad of ${label} (mat2)`);
      cuda.gemm('cublas');
    }
    if (aNeeds) {
      ga = cuda.empty(a.shape, grad.dtype, `grad of ${label} (self)`);
      cuda.gemm('cublas');
    }
    return [ga, gb];
  });
  return out;
}

/**
 * `t.reshape(shape)`: a view when t's memory is in that order (`contiguous`), else `clone` then `_unsafe_view`
 * (CloneBackward0 passes the gradient on; UnsafeViewBackward0 reshapes it, copying when it is not in order).
 */
export function reshape(rt: Runtime, t: Tensor, shape: readonly number[], contiguous: boolean, label: string): Tensor {
  if (contiguous) return rt.autograd.view('ViewBackward0', t, shape);
  return copy(rt, t, shape, label);
}

/** A contiguous copy (`clone`, `.contiguous()`, a reshape that cannot view): CloneBackward0 passes the gradient through. */
export function copy(rt: Runtime, t: Tensor, shape: readonly number[], label: string): Tensor {
  const { cuda, autograd } = rt;
  const out = cuda.empty(shape, t.dtype, label, 'activation');
  autograd.record('CloneBackward0', [t], [out], [], ([grad]) => [grad ? cuda.view(grad, t.shape) : null]);
  return out;
}

/** A view whose backward reshapes a gradient that is not in the view's memory order: a copy. */
export function viewCopyingGrad(rt: Runtime, t: Tensor, shape: readonly number[], label: string, name = 'UnsafeViewBackward0'): Tensor {
  const { cuda, autograd } = rt;
  const out = cuda.view(t, shape);
  autograd.record(name, [t], [out], [], ([grad]) => [grad ? cuda.empty(t.shape, grad.dtype, `grad of ${label} (reshaped)`) : null]);
  return out;
}

export interface MatmulLayout {
  /** Is a's memory in [..., n, k] order (a reshape to 3-d or 2-d is a view)? */
  aContiguous: boolean;
  /** Is b's memory in [..., k, m] order? */
  bContiguous: boolean;
  /**
   * Will the output's gradient arrive contiguous (default)? If not (the output is transposed before its
   * consumer), UnsafeViewBackward0's reshape of it to the bmm's shape is a copy.
   */
  outGradContiguous?: boolean;
}

/**
 * `torch.matmul(a, b)` for a of rank >= 3 with b a matrix (folded into one mm), or a and b of the same rank
 * >= 3 (bmm over the flattened batch). Under autocast both are cast first (b, then a).
 */
export function matmul(rt: Runtime, a: Tensor, b: Tensor, layout: MatmulLayout, label: string): Tensor {
  if (rt.autocast) {
    const [ac, bc] = castLower(rt, [a, b], [`${label} self`, `${label} other`]);
    const out = matmulImpl(rt, ac!, bc!, layout, label);
    rt.cuda.release(ac);
    rt.cuda.release(bc);
    return out;
  }
  return matmulImpl(rt, a, b, layout, label);
}

function matmulImpl(rt: Runtime, a: Tensor, b: Tensor, layout: MatmulLayout, label: string): Tensor {
  const { cuda, autograd } = rt;
  const n = a.shape[a.shape.length - 2]!;
  const k = a.shape[a.shape.length - 1]!;
  const m = b.shape[b.shape.length - 1]!;
  const batch = a.shape.slice(0, -2);
  if (b.shape.length === 2) {
    const rows = a.numel / k;
    const a2 = reshape(rt, a, [rows, k], layout.aContiguous, `${label} (folded input)`);
    const out2 = mm(rt, a2, b, label);
    cuda.release(a2);
    const out = autograd.view('UnsafeViewBackward0', out2, [...batch, n, m], `grad of ${label} (reshaped)`);
    cuda.release(out2);
    return out;
  }
  const flat = batch.reduce((p, d) => p * d, 1);
  // One batch dimension larger than 1 (a batch of one sequence: [1, H, T, D]) folds into bmm's batch as a view
  // whatever the layout: size-1 dimensions merge with any stride, and bmm takes the matrices' strides as they are
  // (measured: phi3_4l_amp_bf16_eager_ckpt_s2048_window, batch 1, copies none of the views eager attention copies at 4)
  const folds = batch.filter((d) => d !== 1).length <= 1;
  const a3 = reshape(rt, a, [flat, n, k], layout.aContiguous || folds, `${label} (batched self)`);
  const b3 = reshape(rt, b, [flat, k, m], layout.bContiguous || folds, `${label} (batched other)`);
  const out3 = bmm(rt, a3, b3, label);
  cuda.release(b3);
  cuda.release(a3);
  const out = layout.outGradContiguous === false && !folds ? viewCopyingGrad(rt, out3, [...batch, n, m], label) : autograd.view('UnsafeViewBackward0', out3, [...batch, n, m], `grad of ${label} (reshaped)`);
  cuda.release(out3);
  return out;
}
