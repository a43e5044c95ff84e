/**
 * Indexing, selection and masking ops as a mixture of experts uses them (transformers 5.17 MixtralTopKRouter and
 * integrations/moe.py `grouped_mm_experts_forward`) and a decoder classifier's last-token logits (`index_put_`
 * with two index tensors), each with its derivatives.yaml backward. Every allocation
 * below was matched against H100 recordings (test/fixtures/calibration/mixtral_4l_*, and a boundary trial at
 * 20,480 rows).
 */
import type { Tensor } from '../tensor/tensor.ts';
import { radixSortTempBytes } from './cub.ts';
import type { Runtime } from './runtime.ts';

/** `torch.sort` sorts a slice of up to this many elements in one block (cuda/Sort.cpp `should_use_small_sort`). */
const kSmallSortMaxElements = 4096;
/** Bytes of the int64 indices index_put_ and sort work on. */
const kIndexBytes = 8;

/** `cub::get_num_bits(max_key)`: the bits a radix sort of keys up to max_key needs. */
function numBits(maxKey: number): number {
  return Math.max(1, Math.floor(Math.log2(Math.max(1, maxKey))) + 1);
}

/**
 * `torch.sort(t)` of a 1-D int64 tensor (no gradient): values, then indices, then a third buffer of the same size
 * that dies with the call; above 4,096 elements CUB's radix sort over all 64 bits also takes its temporary
 * storage, freed before that buffer (measured: 3 x 32,768 B for 4,096 elements; 3 x 163,840 B and 349,695 B of
 * CUB storage for 20,480).
 */
export function sortInt64(rt: Runtime, t: Tensor, label: string): [Tensor, Tensor] {
  const { cuda } = rt;
  const n = t.numel;
  const values = cuda.empty(t.shape, t.dtype, `${label} sorted values`, 'activation');
  const indices = cuda.empty(t.shape, 'int64', `${label} sort indices`, 'activation');
  const scratch = cuda.empty([n], 'int64', `${label} sort scratch`, 'workspace');
  if (n > kSmallSortMaxElements) cuda.release(cuda.empty([radixSortTempBytes(n)], 'uint8', `${label} CUB radix sort`, 'workspace'));
  cuda.release(scratch);
  return [values, indices];
}

/**
 * CUB sorts at most this many int64 key/value pairs in a single tile (dispatch_radix_sort.cuh: SingleTilePolicy,
 * 256 threads x 19 nominal 4-byte items, 9 for 8-byte keys and values), and then asks for 1 byte of temporary
 * storage (measured: 1 B for 8 and for 2,304 pairs; 43,007 B for 2,305 over 14 bits and 71,167 B for 4,096, sorted
 * in tiles).
 */
const kSingleTileSortPairs = 256 * 9;

/**
 * `index_put_(indices, values, accumulate=True)` on CUDA (cuda/Indexing.cu `index_put_with_sort_kernel`), the work
 * an IndexBackward0 does after its zeros: the linear index (`computeLinearIndex`: per index tensor, its
 * `remainder` by the dimension's size, then that times the dimension's stride, the remainder dying; a second
 * index tensor's product is added in place and dies), the sorted and original positions and an `arange`, CUB's
 * radix sort over the bits of the largest row index; all int64 of the indices' count, freed in reverse (measured:
 * 5 x 32,768 B and 71,167 B of CUB storage for 4,096 indices into 2,048 or 4,096 rows; two index tensors of 8,
 * a sequence classifier's `logits[arange(B), last_non_pad_token]`).
 */
export function indexPutAccumulateScratch(rt: Runtime, indices: number, rows: number, label: string, indexTensors = 1): void {
  const { cuda } = rt;
  const tmp = (what: string) => cuda.empty([indices * kIndexBytes], 'uint8', `${label}: index_put_ ${what}`, 'workspace');
  let linear: ReturnType<typeof tmp> | null = null;
  for (let k = 0; k < indexTensors; k++) {
    const remainder = tmp(`index ${k} remainder`);
    const scaled = tmp(`index ${k} x stride`);
    cuda.release(remainder);
    if (linear) cuda.release(scaled); // linearIndex += index
    else linear = scaled;
  }
  const sorted = tmp('sorted indices');
  const original = tmp('original indices');
  const range = tmp('arange');
  // `get_num_bits(largestIndex(self) / sliceSize)`: the bits of the largest row index, rows - 1
  const sortBytes = indices <= kSingleTileSortPairs ? 1 : radixSortTempBytes(indices, numBits(rows - 1));
  cuda.release(cuda.empty([sortBytes], 'uint8', `${label}: index_put_ CUB radix sort`, 'workspace'));
  for (const t of [range, original, sorted, linear]) cuda.release(t);
}

/**
 * `self[indices]` with one int64 index tensor over the first dimension (a gather: `index`): [n, ...rest].
 * IndexBackward0 saves the indices; its backward is `zeros(self.sizes()).index_put_(indices, grad, accumulate=True)`.
 */
export function indexRows(rt: Runtime, self: Tensor, indices: Tensor, label: string): Tensor {
  const { cuda, autograd } = rt;
  const rows = self.shape[0]!;
  const saved = autograd.saveInputs(autograd.needsGrad([self]), [indices]);
  const out = cuda.empty([indices.numel, ...self.shape.slice(1)], self.dtype, label, 'activation');
  autograd.record('IndexBackward0', [self], [out], saved, ([grad]) => {
    if (!grad) return [null];
    const zeros = cuda.empty(self.shape, grad.dtype, `grad of ${label} (zeros, then index_put_)`);
    indexPutAccumulateScratch(rt, indices.numel, rows, `grad of ${label}`);
    return [zeros];
  });
  return out;
}

/**
 * `torch.topk(t, k, dim=-1)`: values (t's dtype) and int64 indices. TopkBackward0 saves the indices; its
 * backward `value_selecting_reduction_backward` scatters the gradient into zeros of t's shape.
 */
export function topk(rt: Runtime, t: Tensor, k: number, label: string): [Tensor, Tensor] {
  const { cuda, autograd } = rt;
  const shape = [...t.shape.slice(0, -1), k];
  const values = cuda.empty(shape, t.dtype, `${label} values`, 'activation');
  const indices = cuda.empty(shape, 'int64', `${label} indices`, 'activation');
  const saved = autograd.needsGrad([t]) ? [cuda.ref(indices)] : [];
  autograd.record('TopkBackward0', [t], [values], saved, ([grad]) => [grad ? cuda.empty(t.shape, grad.dtype, `grad of ${label} (zeros, then scatter)`) : null]);
  return [values, indices];
}

/** `t.sum(dim, keepdim)`: SumBackward1 saves nothing; its backward expands the gradient (a view, no memory). */
export function sumDim(rt: Runtime, t: Tensor, shape: readonly number[], label: string): Tensor {
  const { cuda, autograd } = rt;
  const out = cuda.empty(shape, t.dtype, label, 'activation');
  autograd.record('SumBackward1', [t], [out], [], ([grad]) => [grad ? cuda.view(grad, t.shape) : null]);
  return out;
}

/**
 * `self /= other` for tensors (`div_.Tensor`): the generated code saves `other` and, as the formula of other's
 * gradient needs self's value before the kernel overwrites it, `original_self = self.clone()` (allocated before the
 * kernel; measured). Returns a new reference to self with DivBackward0 as its grad_fn. Backward computes other's
 * gradient first, `-grad * ((self / other) / other)` (three temporaries), then self's, `grad / other`; the engine
 * then sums other's to its shape.
 */
export function divInPlace(rt: Runtime, self: Tensor, other: Tensor, label: string): Tensor {
  const { cuda, autograd } = rt;
  const needs = autograd.needsGrad([self, other]);
  const otherNeeds = autograd.needsGrad([other]);
  const saved = autograd.saveInputs(needs, [other]);
  const original = otherNeeds && autograd.gradMode ? cuda.empty(self.shape, self.dtype, `${label}: original self (clone)`, 'activation') : null;
  const keep = original ? autograd.saveInputs(true, [original]) : [];
  cuda.release(original);
  const out = cuda.ref(self);
  autograd.record('DivBackward0', [self, other], [out], [...saved, ...keep], ([grad]) => {
    if (!grad) return [null, null];
    let gOther: Tensor | null = null;
    if (otherNeeds) {
      const ratio = cuda.empty(self.shape, grad.dtype, `${label} backward: self / other`);
      const ratio2 = cuda.empty(self.shape, grad.dtype, `${label} backward: (self / other) / other`);
      const negGrad = cuda.empty(grad.shape, grad.dtype, `${label} backward: -grad`);
      gOther = cuda.empty(self.shape, grad.dtype, `grad of ${label} (other)`);
      for (const t of [negGrad, ratio2, ratio]) cuda.release(t);
    }
    const gSelf = cuda.empty(self.shape, grad.dtype, `grad of ${label} (self)`);
    return [gSelf, gOther];
  });
  return out;
}

/** `t.masked_fill(mask, value)`: a new tensor; MaskedFillBackward0 saves the mask, its backward `grad.masked_fill(mask, 0)`. */
export function maskedFill(rt: Runtime, t: Tensor, mask: Tensor, label: string): Tensor {
  const { cuda, autograd } = rt;
  const saved = autograd.saveInputs(autograd.needsGrad([t]), [mask]);
  const out = cuda.empty(t.shape, t.dtype, label, 'activation');
  autograd.record('MaskedFillBackward0', [t], [out], saved, ([grad]) => [grad ? cuda.empty(t.shape, grad.dtype, `grad of ${label}`) : null]);
  return out;
}

/** `t.masked_fill_(mask, value)`, in place: a new reference to t whose MaskedFillBackward0 saves the mask. */
export function maskedFillInPlace(rt: Runtime, t: Tensor, mask: Tensor, label: string): Tensor {
  const { cuda, autograd } = rt;
  const saved = autograd.saveInputs(autograd.needsGrad([t]), [mask]);
  const out = cuda.ref(t);
  autograd.record('MaskedFillBackward0', [t], [out], saved, ([grad]) => [grad ? cuda.empty(t.shape, grad.dtype, `grad of ${label}`) : null]);
  return out;
}
