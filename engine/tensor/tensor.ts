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
