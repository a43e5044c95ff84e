/**
 * `torch.autocast` on CUDA (`aten/src/ATen/autocast_mode.cpp`), as memory sees it.
 * - Ops on the lower-precision list (linear, matmul, conv) cast their floating-point arguments to the autocast
 *   dtype; ops on the fp32 list (layer_norm, nll_loss, ...) cast lower-precision arguments to fp32. An argument
 *   already of that dtype is used as it is.
 * - Arguments are cast right to left (C++ evaluates the autocast wrapper's call arguments that way with GCC;
 *   measured on the H100: a linear's bias cast is allocated before its weight's, the weight's before the input's).
 * - Casts of leaves that require grad (parameters) are cached for the autocast region (`cached_cast`), and the
 *   cache is cleared when the outermost region exits.
 * - Each cast is a `_to_copy` with a ToCopyBackward0 node: its backward allocates the gradient in the original dtype.
 */
import type { DType } from '../tensor/dtype.ts';
import type { Tensor } from '../tensor/tensor.ts';
import type { Runtime } from './runtime.ts';

export type AutocastDType = 'bfloat16' | 'float16';

export class Autocast {
  readonly dtype: AutocastDType;
  /** The weight-cast cache, in insertion order. */
  private readonly cache = new Map<object, Tensor>();

  constructor(dtype: AutocastDType) {
    this.dtype = dtype;
  }

  /** `cached_cast(dtype, t)`: a new reference to t in `dtype` (the caller releases it). */
  cast(rt: Runtime, t: Tensor, dtype: DType, label: string): Tensor {
    const { cuda, autograd } = rt;
    if (t.dtype === dtype || !isFloating(t.dtype)) return cuda.ref(t);
    const cacheable = t.leaf !== null && t.requiresGrad;
    if (cacheable) {
      const hit = this.cache.get(t.storage);
      if (hit) return cuda.ref(hit);
    }
    // `t.to(dtype)` keeps a dense tensor's strides (MemoryFormat::Preserve), and so does its backward's `grad.to(...)`
    const out = cuda.empty(t.shape, dtype, `${label} (autocast to ${dtype})`, 'activation');
    out.impl.memoryOrder = t.impl.memoryOrder;
    autograd.record('ToCopyBackward0', [t], [out], [], ([grad]) => {
      if (!grad) return [null];
      const back = cuda.empty(t.shape, t.dtype, `grad of ${label} (back to ${t.dtype})`);
      back.impl.memoryOrder = grad.impl.memoryOrder;
      return [back];
    });
    if (cacheable) {
      this.cache.set(t.storage, out);
      return cuda.ref(out);
    }
    return out;
  }

  /** Casts cached so far. */
  get cachedCount(): number {
    return this.cache.size;
  }

  /** The casts cached after the first `count`, in order: the weight's storage (the key) and the cast. */
  cachedSince(count: number): [object, Tensor][] {
    return [...this.cache].slice(count);
  }

  /** Caches a cast made elsewhere (a replayed block's: Note [Reused blocks], models/block-reuse.ts). */
  keep(weightStorage: object, cast: Tensor): void {
    this.cache.set(weightStorage, cast);
  }

  /** Leaving the outermost autocast region: the cached casts are dropped (`clear_cache`). */
  exit(rt: Runtime): void {
    for (const t of this.cache.values()) rt.cuda.release(t);
    this.cache.clear();
  }
}

function isFloating(dtype: DType): boolean {
  return dtype === 'float32' || dtype === 'float16' || dtype === 'bfloat16';
}

/** Casts `args` (right to left, as the autocast wrappers evaluate them) for an op of the lower-precision list. */
export function castLower(rt: Runtime, args: readonly (Tensor | null)[], labels: readonly string[]): (Tensor | null)[] {
  const ac = rt.autocast;
  const out = new Array<Tensor | null>(args.length).fill(null);
  for (let i = args.length - 1; i >= 0; i--) {
    const t = args[i];
    out[i] = t ? (ac ? ac.cast(rt, t, ac.dtype, labels[i] ?? '') : rt.cuda.ref(t)) : null;
  }
  return out;
}

/** Whether castLower copies `t` (autocast on, `t` floating in another dtype): the copy is a new tensor. */
export function castsLower(rt: Runtime, t: Tensor): boolean {
  const ac = rt.autocast;
  return ac !== null && t.dtype !== ac.dtype && isFloating(t.dtype);
}

/** Casts one argument of an op of the fp32 list. */
export function castFp32(rt: Runtime, t: Tensor, label: string): Tensor {
  const ac = rt.autocast;
  return ac ? ac.cast(rt, t, 'float32', label) : rt.cuda.ref(t);
}
