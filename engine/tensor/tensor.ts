/**
 * Tensors and storages as the simulator sees them: shapes, dtypes and who keeps the memory alive.
 * Memory belongs to a Storage; a Tensor is one reference to it (a Python variable, a saved tensor, a gradient
 * in autograd's buffers). Views are further references to the same storage and allocate nothing. The storage's
 * block goes back to the caching allocator when its last reference is released, as PyTorch's refcounting does.
 */
import type { Block } from '../allocator/block.ts';
import { DTYPE_BYTES, type DType } from './dtype.ts';
import type { Node, Parameter } from '../autograd/engine.ts';

export function numel(shape: readonly number[]): number {
  let n = 1;
  for (let i = 0; i < shape.length; i++) n *= shape[i]!;
  return n;
}

export function nbytes(shape: readonly number[], dtype: DType): number {
  return numel(shape) * DTYPE_BYTES[dtype];
}

/** What a storage holds, for the breakdown at the peak. */
export type MemoryCategory =
  | 'parameter'
  | 'gradient'
  | 'optimizer_state'
  | 'activation'
  | 'temporary'
  | 'workspace'
  | 'input';

export class Storage {
  readonly nbytes: number;
  /** The allocator's block; null for an empty tensor (PyTorch never allocates 0 bytes). */
  block: Block | null;
  /** TensorImpls over this storage (`storage().use_count()`). */
  refs = 0;
  /** What allocated_bytes counts for it: its block's size when handed out (rounded, maybe an unsplit remainder). */
  readonly allocatedBytes: number;
  label: string;
  category: MemoryCategory;
  /** The simulated GPU's event counter when the block was handed out, and when it went back (the timeline). */
  allocEvent = 0;
  freeEvent = Number.POSITIVE_INFINITY;
  /** Storages with memory the simulated GPU handed out before this one (-1: none handed out): recorders index by it. */
  serial = -1;

  constructor(nbytes: number, block: Block | null, label: string, category: MemoryCategory) {
    this.nbytes = nbytes;
    this.block = block;
    this.allocatedBytes = block?.size ?? 0;
    this.label = label;
    this.category = category;
  }
}

/**
 * A TensorImpl: what `use_count()` counts. References to one tensor share it; a view is an impl of its own
 * over the same storage that keeps its base alive (a view's autograd meta holds its base), so the storage's
 * `use_count()` is then above 1 even when nobody else holds the view.
 */
export class TensorImpl {
  refs = 0;
  readonly storage: Storage;
  readonly base: TensorImpl | null;
  /**
   * Where a dense tensor's dimensions lie in memory, outermost first, when not in its own order (null:
   * contiguous): [1, 0, 2] for a [B, L, E] tensor whose memory is [L, B, E] (nn.MultiheadAttention's batch-first
   * output). Set where PyTorch's would be laid out otherwise (nn.MultiheadAttention's transposes, and what follows
   * from them: elementwiseMemoryOrder, reshapedMemoryOrder); read where PyTorch copies or steals by layout
   * (obeysLayoutContract, isContiguous).
   */
  memoryOrder: readonly number[] | null = null;

  constructor(storage: Storage, base: TensorImpl | null) {
    this.storage = storage;
    this.base = base;
    storage.refs++;
    if (base) base.refs++;
  }
}

export class Tensor {
  readonly shape: readonly number[];
  readonly dtype: DType;
  readonly impl: TensorImpl;
  /** The autograd node that made this tensor (null for leaves and tensors that need no gradient). */
  gradFn: Node | null = null;
  /** Which of gradFn's outputs this tensor is. */
  outputSlot = 0;
  /** Leaves that require grad (parameters); their gradient goes to `leaf.accumulateGrad`. */
  requiresGrad = false;
  leaf: Parameter | null = null;
  released = false;

  constructor(shape: readonly number[], dtype: DType, impl: TensorImpl) {
    this.shape = shape;
    this.dtype = dtype;
    this.impl = impl;
    impl.refs++;
  }

  get storage(): Storage {
    return this.impl.storage;
  }

  get numel(): number {
    return numel(this.shape);
  }

  get nbytes(): number {
    return this.numel * DTYPE_BYTES[this.dtype];
  }
}

/**
 * The memory order of a view of a tensor laid out in `order` (see TensorImpl.memoryOrder), reshaped to `to`: as
 * `computeStride` (aten/src/ATen/TensorUtils.cpp) finds the view's strides; undefined when no view has that shape
 * (`reshape` then copies, `view` raises).
 */
export function reshapedMemoryOrder(from: readonly number[], order: readonly number[] | null, to: readonly number[]): readonly number[] | null | undefined {
  if (order === null) return null;
  const oldStride = denseStrides(from, order);
  const newStride = new Array<number>(to.length);
  let viewD = to.length - 1;
  let chunkBaseStride = oldStride[oldStride.length - 1] ?? 1;
  let tensorNumel = 1;
  let viewNumel = 1;
  for (let d = from.length - 1; d >= 0; d--) {
    tensorNumel *= from[d]!;
    if (d === 0 || (from[d - 1] !== 1 && oldStride[d - 1] !== tensorNumel * chunkBaseStride)) {
      while (viewD >= 0 && (viewNumel < tensorNumel || to[viewD] === 1)) {
        newStride[viewD] = viewNumel * chunkBaseStride;
        viewNumel *= to[viewD]!;
        viewD--;
      }
      if (viewNumel !== tensorNumel) return undefined;
      if (d > 0) {
        chunkBaseStride = oldStride[d - 1]!;
        tensorNumel = 1;
        viewNumel = 1;
      }
    }
  }
  if (viewD !== -1) return undefined;
  // the dimensions from the largest stride down (size-1 dimensions where they stand)
  const dims = to.map((_, k) => k).filter((k) => to[k] !== 1);
  const sorted = [...dims].sort((a, b) => newStride[b]! - newStride[a]!);
  if (sorted.every((k, i) => k === dims[i])) return null;
  const out: number[] = [];
  let next = 0;
  for (let k = 0; k < to.length; k++) out.push(to[k] === 1 ? k : sorted[next++]!);
  return out;
}

/**
 * The memory order TensorIterator gives an elementwise op's output (`reorder_dimensions`, TensorIterator.cpp): the
 * output's dimensions sorted by the operands' strides (an insertion sort from the innermost), each pair decided by
 * the first operand that has neither of the two broadcast (stride 0) and strides that differ; equal strides put the
 * smaller dimension inside; a pair no operand decides keeps its order. So `a + b` is laid out as a, unless a is
 * broadcast along one of the two.
 */
export function elementwiseMemoryOrder(shape: readonly number[], operands: readonly Tensor[]): readonly number[] | null {
  if (operands.every((t) => t.impl.memoryOrder === null)) return null;
  const n = shape.length;
  const strides = operands.map((t) => {
    const own = denseStrides(t.shape, t.impl.memoryOrder);
    const offset = n - t.shape.length;
    return shape.map((size, d) => (d < offset || (t.shape[d - offset] === 1 && size !== 1) ? 0 : own[d - offset]!));
  });
  const shouldSwap = (dim0: number, dim1: number): number => {
    for (const s of strides) {
      const s0 = s[dim0]!;
      const s1 = s[dim1]!;
      if (s0 === 0 || s1 === 0) continue;
      if (s0 < s1) return -1;
      if (s0 > s1) return 1;
      if (shape[dim0]! > shape[dim1]!) return 1;
    }
    return 0;
  };
  const perm = shape.map((_, k) => n - 1 - k); // innermost first
  for (let i = 1; i < n; i++) {
    let dim1 = i;
    for (let dim0 = i - 1; dim0 >= 0; dim0--) {
      const comparison = shouldSwap(perm[dim0]!, perm[dim1]!);
      if (comparison > 0) {
        [perm[dim0], perm[dim1]] = [perm[dim1]!, perm[dim0]!];
        dim1 = dim0;
      } else if (comparison < 0) break;
    }
  }
  const order = perm.reverse();
  return order.every((d, k) => d === k) ? null : order;
}

/** Whether a dense tensor is contiguous (`is_contiguous()`: contiguous strides in every dimension of more than one element). */
export function isContiguous(t: Tensor): boolean {
  return t.impl.memoryOrder === null || sameStridesWhereSized(t.shape, t.impl.memoryOrder, null);
}

/** The memory order of `t.transpose(i, j)` (see TensorImpl.memoryOrder). */
export function swappedMemoryOrder(t: Tensor, i: number, j: number): readonly number[] | null {
  const order = (t.impl.memoryOrder ?? t.shape.map((_, k) => k)).map((d) => (d === i ? j : d === j ? i : d));
  return order.every((d, k) => d === k) ? null : order;
}

/** The strides of a dense tensor whose dimensions lie in memory in `order` (outermost first; null: contiguous). */
function denseStrides(shape: readonly number[], order: readonly number[] | null): number[] {
  const strides = new Array<number>(shape.length);
  let stride = 1;
  for (let k = shape.length - 1; k >= 0; k--) {
    const dim = order ? order[k]! : k;
    strides[dim] = stride;
    stride *= shape[dim]!;
  }
  return strides;
}

/**
 * `obeys_layout_contract(grad, variable)` (torch/csrc/autograd/utils/grad_layout_contract.h) for dense tensors of
 * one shape: the same strides in every dimension of more than one element. AccumulateGrad steals a gradient only
 * when it does, and otherwise copies it into the variable's layout (`clone_obey_contract`).
 */
export function obeysLayoutContract(grad: Tensor, variable: Tensor): boolean {
  return grad.impl.memoryOrder === variable.impl.memoryOrder || sameStridesWhereSized(grad.shape, grad.impl.memoryOrder, variable.impl.memoryOrder);
}

/** Whether dense tensors of `shape` laid out in orders a and b have the same strides in every dimension of more than one element. */
function sameStridesWhereSized(shape: readonly number[], a: readonly number[] | null, b: readonly number[] | null): boolean {
  const sa = denseStrides(shape, a);
  const sb = denseStrides(shape, b);
  for (let k = 0; k < shape.length; k++) if (shape[k] !== 1 && sa[k] !== sb[k]) return false;
  return true;
}
