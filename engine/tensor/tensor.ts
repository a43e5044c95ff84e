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
   * output). Only what `obeysLayoutContract` reads: set where a model's tensors are known to be laid out otherwise.
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
  const a = grad.impl.memoryOrder;
  const b = variable.impl.memoryOrder;
  if (a === b) return true;
  const gs = denseStrides(grad.shape, a);
  const vs = denseStrides(variable.shape, b);
  for (let k = 0; k < gs.length; k++) if (grad.shape[k] !== 1 && gs[k] !== vs[k]) return false;
  return true;
}
