/**
 * What a block's code does with the allocator in its forward or its backward, recorded and replayed (Note [Reused
 * blocks], block-reuse.ts): the requests, the references to what the block was given, the labels.
 */
import { OutOfMemoryError } from '../allocator/caching-allocator.ts';
import type { CudaDevice, StorageObserver } from '../tensor/cuda.ts';
import type { DType } from '../tensor/dtype.ts';
import type { MemoryCategory, Storage, Tensor } from '../tensor/tensor.ts';

/** A recording could not be replayed exactly: simulate the plan again without reusing blocks. */
export class BlocksNotReusable extends Error {
  constructor(why: string) {
    super(`blocks not reused: ${why}`);
    this.name = 'BlocksNotReusable';
    blockReuseCounts.notReusable++;
    const reasons = blockReuseCounts.reasons;
    if (reasons.has(why) || reasons.size < kReasonsKept) reasons.set(why, (reasons.get(why) ?? 0) + 1);
  }
}

/** Reasons counted at most (each names a label: a long-lived worker would gather them without end). */
const kReasonsKept = 100;

/** Blocks replayed and passes given up in this process, and why (what the tests read). */
export const blockReuseCounts = { replayedForwards: 0, replayedBackwards: 0, notReusable: 0, reasons: new Map<string, number>() };

/** Ops of a recording, 4 codes per index: allocate storage k, free it, rename it, let go of external j. */
const kAlloc = 0;
export const kFree = 1;
const kRename = 2;
const kDrop = 3;

/** What a block does with the allocator in its forward or its backward, and with what it was given. */
export interface Recording {
  /** `4k + kAlloc | kFree | kRename`, `4j + kDrop`. */
  readonly ops: number[];
  /** The storages the recording allocated, in order: sizes, labels, the allocator's labels, categories. */
  readonly sizes: number[];
  readonly labels: string[];
  readonly allocatorLabels: string[];
  readonly categories: MemoryCategory[];
  /** (op index, frames that free memory on unwinding open inside the block) where the count changed. */
  readonly unwinding: number[];
}

export interface ForwardRecording extends Recording {
  /** Per external (the block's input, then its closure): whether the block still held it after its forward. */
  readonly holds: boolean[];
  /**
   * Storages the forward left that the block's code holds (its backward frees them), by index; the others it left
   * (but its output) only holders outside it keep.
   */
  readonly blockHeld: boolean[];
  /** What the forward left with holders outside the block: the autocast cache's casts, the model's `kept` list. */
  readonly cached: OutsideEntry[];
  readonly kept: OutsideEntry[];
  /** The output's storage (an index of the recording) and its shape and dtype. */
  readonly output: number;
  readonly outputShape: readonly number[];
  readonly outputDType: DType;
  /** The output's memory order (TensorImpl.memoryOrder: a ViT block's residual sum is [N, B, E] in memory). */
  readonly outputMemoryOrder: readonly number[] | null;
  /** Whether the output has a grad_fn (a frozen block's records no graph). */
  readonly graph: boolean;
  /** Reentrant checkpointed blocks whose input needed no gradient, in the forward (`Autograd.reentrantBlocksWithoutGrad`). */
  readonly withoutGrad: number;
}

export interface BackwardRecording extends Recording {
  /** Storages of the block's forward: indices below this are the forward's, the others the backward's own. */
  readonly forwardCount: number;
  /** Final labels and categories of renamed storages (index -> [label, category]). */
  readonly renamed: Map<number, [string, MemoryCategory]>;
  /** Gradients given to the block's parameters: (parameter index, storage index, view depth), in threes. */
  readonly grads: number[];
  /** The gradient passed on: a storage index, or -1 for the incoming gradient itself. */
  readonly output: number;
  /** The memory order of a gradient passed on that the backward made (null for the incoming one). */
  readonly outputMemoryOrder: readonly number[] | null;
}

/** A tensor over storage k of a block's forward that a holder outside the block keeps (`weight`: the cast's key). */
export interface OutsideEntry {
  readonly k: number;
  readonly weight: number;
  readonly shape: readonly number[];
  readonly dtype: DType;
}

export function sameEntries(a: readonly OutsideEntry[], b: readonly OutsideEntry[]): boolean {
  return a.length === b.length && a.every((x, i) => x.k === b[i]!.k && x.weight === b[i]!.weight && x.dtype === b[i]!.dtype && equalArrays(x.shape, b[i]!.shape));
}

/** The same labels, the allocator's too (a block's rewritten for another: relabel). */
export function sameNames(a: Names, b: Names): boolean {
  return equalArrays(a.labels, b.labels) && equalArrays(a.allocatorLabels, b.allocatorLabels);
}

export function sameRecording(a: Recording, b: Recording): boolean {
  return equalArrays(a.ops, b.ops) && equalArrays(a.sizes, b.sizes) && equalArrays(a.categories, b.categories) && equalArrays(a.unwinding, b.unwinding);
}

export function equalArrays<T>(a: readonly T[], b: readonly T[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Equal memory orders (TensorImpl.memoryOrder; null: contiguous). */
export function sameMemoryOrder(a: readonly number[] | null, b: readonly number[] | null): boolean {
  return a === b || (a !== null && b !== null && equalArrays(a, b));
}

/**
 * Hears a block's requests while its code runs (passing them on to the observer that was listening), as a
 * Recording. `forward` (for a backward): the block's forward recording and the serial of its first storage.
 */
export class BlockRecorder implements StorageObserver {
  readonly ops: number[] = [];
  readonly sizes: number[] = [];
  readonly labels: string[] = [];
  readonly allocatorLabels: string[] = [];
  readonly categories: MemoryCategory[] = [];
  readonly unwinding: number[] = [];
  readonly renamedAt = new Set<number>();
  private readonly storages: Storage[] = [];
  private readonly firstSerial: number;
  private readonly outerFrames: number;
  private frames = 0;
  /** Why the recording cannot be replayed (null: it can). */
  failure: string | null = null;
  /**
   * Per external, in a backward: the reference count at which the block has let go of it, and whether it has (an
   * external the block held no reference to, or any in a forward, counts as let go of from the start).
   */
  private readonly watched: { tensor: Tensor; threshold: number; letGo: boolean }[];

  private readonly cuda: CudaDevice;
  private readonly inner: StorageObserver | null;
  /** The block's input, the tensors its call was passed, and in a backward the incoming gradient. */
  readonly externals: readonly Tensor[];
  private readonly forward: { storages: readonly Storage[]; firstSerial: number } | null;
  /** A backward: the externals are watched for the block letting go of them. */
  private readonly watching: boolean;

  /**
   * `watch` (a backward): per external, the reference count at which the block has let go of it (null: it held
   * none); `forward`: the block's forward's storages and the serial of its first.
   */
  constructor(cuda: CudaDevice, inner: StorageObserver | null, externals: readonly Tensor[], watch: readonly (number | null)[] | null, forward: { storages: readonly Storage[]; firstSerial: number } | null) {
    this.cuda = cuda;
    this.inner = inner;
    this.externals = externals;
    this.forward = forward;
    this.firstSerial = cuda.storageSerials;
    this.outerFrames = cuda.unwindingFrames;
    this.watching = watch !== null;
    this.watched = externals.map((tensor, j) => {
      const threshold = watch?.[j] ?? null;
      return { tensor, threshold: threshold ?? 0, letGo: threshold === null };
    });
  }

  get forwardCount(): number {
    return this.forward?.storages.length ?? 0;
  }

  /** The storage's index in this recording (forward storages first), or -1. */
  indexOf(s: Storage): number {
    const own = s.serial - this.firstSerial;
    if (own >= 0 && own < this.storages.length && this.storages[own] === s) return this.forwardCount + own;
    const f = this.forward;
    if (f) {
      const k = s.serial - f.firstSerial;
      if (k >= 0 && k < f.storages.length && f.storages[k] === s) return k;
    }
    return -1;
  }

  get ownStorages(): readonly Storage[] {
    return this.storages;
  }

  get firstOwnSerial(): number {
    return this.firstSerial;
  }

  /** Before each request: the frames open and the externals let go of since the last one. */
  private before(): void {
    this.noteFrames();
    this.checkDrops();
  }

  /** The frames that free memory on unwinding open inside the block now, where they changed. */
  private noteFrames(): void {
    const frames = this.cuda.unwindingFrames - this.outerFrames;
    if (frames !== this.frames) {
      this.frames = frames;
      this.unwinding.push(this.ops.length, frames);
    }
  }

  /**
   * Externals whose references held by the block are gone. `done`: the recording ends, and each must be gone but
   * `passedOn` (the incoming gradient, passed on as the block's).
   */
  checkDrops(done = false, passedOn = -1): void {
    if (done) this.noteFrames(); // the last lets-go replay with the frames open at the end
    for (let j = 0; j < this.watched.length; j++) {
      const w = this.watched[j]!;
      if (w.letGo) continue;
      if (w.tensor.impl.refs <= w.threshold) {
        w.letGo = true;
        this.ops.push(4 * j + kDrop);
      } else if (done && j !== passedOn) this.failure ??= `the block keeps external ${j} past its backward`;
    }
  }

  allocated(storage: Storage, allocatorLabel: string): void {
    this.inner?.allocated(storage, allocatorLabel);
    this.before();
    const k = this.storages.length;
    if (storage.serial !== this.firstSerial + k) this.failure ??= 'storage serials out of order';
    this.storages.push(storage);
    this.sizes.push(storage.nbytes);
    this.labels.push(storage.label);
    this.allocatorLabels.push(allocatorLabel);
    this.categories.push(storage.category);
    this.ops.push(4 * (this.forwardCount + k) + kAlloc);
  }

  freed(storage: Storage): void {
    this.inner?.freed(storage);
    this.before();
    const k = this.indexOf(storage);
    if (k >= 0) this.ops.push(4 * k + kFree);
    // an external's free in a backward follows from letting it go (checkDrops placed the drop before it)
    else if (!this.watching || !this.externals.some((t) => t.storage === storage)) this.failure ??= `the block freed a storage it does not own (${storage.label})`;
  }

  renaming(storage: Storage): void {
    this.inner?.renaming(storage);
    this.before();
    const k = this.indexOf(storage);
    if (k < 0 || this.renamedAt.has(k)) this.failure ??= 'a storage renamed twice or from outside the block';
    this.renamedAt.add(k);
    this.ops.push(4 * k + kRename);
  }
}

/** The labels a replay gives the storages it allocates (a recording's, or rewritten for another block). */
export interface Names {
  readonly labels: readonly string[];
  readonly allocatorLabels: readonly string[];
}

/**
 * `label` with the module path of one block (`from`, e.g. `model.layers.1`) made another's (`to`): every
 * occurrence not followed by a digit (`model.layers.1` is not in `model.layers.12`).
 */
export function relabel(label: string, from: string, to: string): string {
  let at = label.indexOf(from);
  if (at < 0) return label;
  let out = '';
  let last = 0;
  while (at >= 0) {
    const end = at + from.length;
    const next = label.charCodeAt(end);
    if (!(next >= 48 && next <= 57)) {
      out += label.slice(last, at) + to;
      last = end;
    }
    at = label.indexOf(from, end);
  }
  return out + label.slice(last);
}

/** A recording's names as another block's (`names` unchanged when from === to). */
export function namesFor(r: Recording, from: string, to: string): Names {
  if (from === to) return r;
  return { labels: r.labels.map((l) => relabel(l, from, to)), allocatorLabels: r.allocatorLabels.map((l) => relabel(l, from, to)) };
}

/**
 * Replays a recording's ops: allocations into `storages` (forward storages first, as the recording indexes
 * them) under `names`, frees (of a forward storage in a backward: the block's reference to it, `held[k]`, released), renames
 * (`rename`), and letting go of externals (`externals[j]`, released).
 */
export function replayOps(cuda: CudaDevice, r: Recording & { forwardCount?: number }, names: Names, storages: Storage[], externals: (Tensor | null)[], held: (Tensor | null)[] | null, rename: (k: number) => void): void {
  const outer = cuda.unwindingFrames;
  const offset = r.forwardCount ?? 0;
  const { ops, unwinding } = r;
  let nextChange = 0;
  let inner = 0;
  try {
    for (let i = 0; i < ops.length; i++) {
      if (nextChange < unwinding.length && unwinding[nextChange] === i) {
        inner = unwinding[nextChange + 1]!;
        cuda.unwindingFrames = outer + inner;
        nextChange += 2;
      }
      const op = ops[i]!;
      const k = op >> 2;
      switch (op & 3) {
        case kAlloc: {
          const own = k - offset;
          storages[k] = cuda.allocateStorage(r.sizes[own]!, names.labels[own]!, r.categories[own]!, names.allocatorLabels[own]!);
          break;
        }
        case kFree:
          if (k >= offset) cuda.freeStorage(storages[k]!);
          else {
            // a storage of the block's forward: its last reference goes (the outside holders let go before)
            cuda.release(held![k]);
            held![k] = null;
            if (storages[k]!.block !== null) throw new BlocksNotReusable("a storage of the block's forward is held elsewhere at its free");
          }
          break;
        case kRename:
          rename(k);
          break;
        default:
          cuda.release(externals[k]);
          externals[k] = null;
      }
    }
  } catch (error) {
    // The block's code would unwind frames that free memory here: only the full simulation knows those frees.
    if (error instanceof OutOfMemoryError && inner > 0) throw new BlocksNotReusable('out of memory inside frames the replay does not unwind');
    throw error;
  } finally {
    cuda.unwindingFrames = outer;
  }
}

export function recordingOf(rec: BlockRecorder): Recording {
  return { ops: rec.ops, sizes: rec.sizes, labels: rec.labels, allocatorLabels: rec.allocatorLabels, categories: rec.categories, unwinding: rec.unwinding };
}
