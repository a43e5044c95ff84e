/**
 * `F.embedding(ids, weight)` on CUDA (`aten/src/ATen/native/Embedding.cpp`, `cuda/Embedding.cu`,
 * `cuda/EmbeddingBackwardKernel.cu`). Forward: `index_select` allocates the output, nothing else.
 * EmbeddingBackward0 saves the indices only. `embedding_dense_backward_cuda`:
 * - up to 3072 indices: `grad_weight = zeros({V, D})` in the gradient's dtype, one kernel;
 * - above: sorted and original indices, an `arange`, CUB's radix sort (its temporary storage through the caching
 *   allocator), then `embedding_backward_cuda_kernel`: grad_weight, segment offsets, CUB's unique_by_key (an
 *   owned key buffer and temporary storage), the per-segment partial counts and their offsets, a scan's
 *   temporary, the partial-segment offsets and `grad_weight_per_segment` in the op-math dtype. Their sizes are
 *   upper bounds (min(N, V) segments, N/10 + min(N, V) partial segments), so they do not depend on which ids a
 *   batch holds. Measured on the H100 with C++ stacks (test/fixtures/probes): every size below, e.g. CUB's sort
 *   temporary 83,455 B and grad_weight_per_segment 9,226,240 B for N = 4096, V = 8192, D = 512 in fp32.
 */
import { DTYPE_BYTES } from '../tensor/dtype.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { cubTileStateTempBytes, kScanTileItems, kUniqueByKeyTileItems, radixSortTempBytes } from './cub.ts';
import type { Runtime } from './runtime.ts';

/** `num_indices <= 3072 && !scale_grad_by_freq` takes the direct kernel (Embedding.cu). */
const kDirectKernelMaxIndices = 3072;
/** `NROWS_PER_THREAD` of EmbeddingBackwardKernel.cu. */
const kRowsPerThread = 10;
/** Bytes of the int64 indices and offsets the backward works on. */
const kIndexBytes = 8;
/** `indicesContiguous: false` for expanded indices (BERT's token types): backward first makes them contiguous. */
export function embedding(rt: Runtime, weight: Tensor, ids: Tensor, label: string, indicesContiguous = true): Tensor {
  const { cuda, autograd } = rt;
  const [numWeights, dim] = weight.shape as [number, number];
  const saved = autograd.saveInputs(autograd.needsGrad([weight]), [ids]);
  const out = cuda.empty([...ids.shape, dim], weight.dtype, label, 'activation');
  autograd.record('EmbeddingBackward0', [weight], [out], saved, ([grad]) => {
    if (!grad) return [null];
    // `indices.contiguous()`: a copy of expanded indices, alive for the whole backward (measured on the H100)
    const contiguous = indicesContiguous ? null : rt.cuda.empty(ids.shape, ids.dtype, `${label} backward: indices.contiguous()`, 'workspace');
    const gradWeight = embeddingDenseBackward(rt, grad, ids.numel, numWeights, dim, label);
    rt.cuda.release(contiguous);
    return [gradWeight];
  });
  return out;
}

function embeddingDenseBackward(rt: Runtime, grad: Tensor, n: number, numWeights: number, dim: number, label: string): Tensor {
  const { cuda } = rt;
  const gradLabel = `grad of ${label} weight`;
  if (n <= kDirectKernelMaxIndices) return cuda.empty([numWeights, dim], grad.dtype, gradLabel);
  const tmp = (bytes: number, what: string) => cuda.empty([bytes], 'uint8', `${label} backward: ${what}`, 'workspace');
  const sortedIndices = tmp(n * kIndexBytes, 'sorted indices');
  const origIndices = tmp(n * kIndexBytes, 'original indices');
  const range = tmp(n * kIndexBytes, 'arange');
  const sortTemp = tmp(radixSortTempBytes(n), 'CUB radix sort');
  cuda.release(sortTemp);
  cuda.release(range);
  // embedding_backward_cuda_kernel
  const gradWeight = cuda.empty([numWeights, dim], grad.dtype, gradLabel);
  const segments = Math.min(n, numWeights);
  const partialSegments = Math.floor(n / kRowsPerThread) + segments;
  const segmentOffsets = tmp(n * kIndexBytes, 'segment offsets');
  const numSegments = tmp(kIndexBytes, 'number of segments');
  const uniqueKeys = tmp(n * kIndexBytes, 'CUB unique_by_key keys');
  const uniqueTemp = tmp(cubTileStateTempBytes(n, kUniqueByKeyTileItems), 'CUB unique_by_key');
  cuda.release(uniqueTemp);
  cuda.release(uniqueKeys);
  const partialsPerSegment = tmp(segments * kIndexBytes, 'partials per segment');
  const partialsPerSegmentOffset = tmp(segments * kIndexBytes, 'partials per segment offsets');
  // the scan runs over `max_segments` = min(N, V) items
  const scanTemp = tmp(cubTileStateTempBytes(segments, kScanTileItems), 'CUB exclusive sum');
  cuda.release(scanTemp);
  const numPartialSegments = tmp(kIndexBytes, 'number of partial segments');
  const partialSegmentOffset = tmp(partialSegments * kIndexBytes, 'partial segment offsets');
  // A small table (few segments, many partial segments) takes the fused kernel: per partial segment its segment
  // index, and for half types an fp32 accumulator of the whole table copied into grad_weight. Otherwise
  // grad_weight_per_segment in the op-math dtype (fp32 for half types). Measured on the H100: BERT's token-type
  // table (V = 2) takes the fused kernel.
  const stride = Math.ceil(dim / 32) * 32;
  const scatterGrid = Math.ceil((segments * stride) / Math.min(stride, 1024));
  const fused = scatterGrid < cuda.multiProcessorCount * 4 && partialSegments > scatterGrid * 4;
  const half = grad.dtype === 'float16' || grad.dtype === 'bfloat16';
  const scratch: Tensor[] = [];
  if (fused) {
    scratch.push(tmp(partialSegments * kIndexBytes, 'partial_to_segment_idx'));
    if (half) scratch.push(tmp(numWeights * stride * 4, 'grad_weight_acc (fp32)'));
  } else {
    scratch.push(tmp(partialSegments * dim * Math.max(4, DTYPE_BYTES[grad.dtype]), 'grad_weight_per_segment'));
  }
  // locals die in reverse order of declaration
  for (const t of [...scratch.reverse(), partialSegmentOffset, numPartialSegments, partialsPerSegmentOffset, partialsPerSegment, numSegments, segmentOffsets]) cuda.release(t);
  cuda.release(origIndices);
  cuda.release(sortedIndices);
  return gradWeight;
}
