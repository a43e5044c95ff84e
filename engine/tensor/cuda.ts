/**
 * The simulated GPU a training step runs on: tensors are allocated from the simulated caching allocator and
 * given back when their storage's last reference goes. Also the library workspaces that come through the
 * allocator: cuBLAS keeps one workspace per thread (the Python thread and autograd's backward thread), made at
 * that thread's first GEMM and kept for the process; cuBLASLt (GEMMs with a fused bias) one more per thread.
 * Records the timeline of allocated and reserved bytes by phase.
 */
import type { Block } from '../allocator/block.ts';
import type { CachingAllocator } from '../allocator/caching-allocator.ts';
import { DTYPE_BYTES, accType, type DType } from './dtype.ts';
import { reductionWorkspace, type ReductionDevice, type ReductionShape } from './reduce-config.ts';
import { Storage, Tensor, TensorImpl, nbytes, type MemoryCategory } from './tensor.ts';
import { TimelineRecorder, type RawTimeline } from '../result/timeline.ts';

export type Thread = 'main' | 'autograd';
export type GemmKind = 'cublas' | 'cublaslt';

export interface Workspaces {
  /** cuBLAS workspace per thread: 32 MiB on Hopper and Blackwell (sm90/100/120), else 8,519,680 B. */
  cublasBytes: number;
  /** cuBLASLt workspace (CUBLASLT_WORKSPACE_SIZE, 1 MiB by default), measured separate on the H100. */
  cublasLtBytes: number;
}

/** Hears the storages a step allocates, renames and frees, in order (train/step-replay.ts records a step with it). */
export interface StorageObserver {
  /** `allocatorLabel`: the label the allocator was given (the storage's own may be renamed later). */
  allocated(storage: Storage, allocatorLabel: string): void;
  freed(storage: Storage): void;
  /** The storage is about to be given another label and category (`rename`). */
  renaming(storage: Storage): void;
}

export class CudaDevice {
  readonly allocator: CachingAllocator;
  private readonly workspaces: Workspaces;
  private readonly threadWorkspaces = new Map<string, Tensor>();
  /** The thread ops run on now: backward runs on autograd's device thread. */
  thread: Thread = 'main';
  private currentPhase = 'load';
  /**
   * Runs once, as the first backward begins: autograd's device thread starts and creates its library handles
   * outside the allocator (Note [Library handles] in train/simulate.ts). Throws OutOfMemoryError when they find no room.
   */
  onFirstBackward: (() => void) | null = null;
  step = 0;
  events = 0;
  /** Storages with memory handed out so far (each storage's `serial`). */
  storageSerials = 0;
  /** Allocated and reserved bytes after each event, and the step and phase it happened in (compact columns). */
  private readonly timelineColumns = new TimelineRecorder(1);
  /** A convolution's cuDNN workspaces came from no measured row (ops/conv.ts): the result's caveats say so. */
  convWorkspacesEstimated = false;
  /** The cuDNN convolution plan (its workspace sizes) that ran for each convolution, as PyTorch's benchmark cache keeps it. */
  readonly convPlans = new Map<string, readonly number[]>();
  /** cuDNN convolution plans run so far (cached or not): a block that runs one is not replayed (Note [Reused blocks]). */
  convPlanRuns = 0;
  /** What the simulated program is doing: 'load', 'forward', 'backward', 'optimizer', 'zero_grad'. */
  get phase(): string {
    return this.currentPhase;
  }

  set phase(phase: string) {
    this.currentPhase = phase;
    if (phase === 'backward' && this.onFirstBackward) {
      const first = this.onFirstBackward;
      this.onFirstBackward = null;
      first();
    }
  }

  /** Record the timeline (off for the trials of a search, which only need the peaks). */
  recordTimeline = true;
  /**
   * The storages handed out, with the events they lived between, when the peak's contents are wanted
   * (`recordStorages`): what was live at the peak is read once at the end (`liveAtPeak`), instead of copying the
   * live set each time the peak rises. Those that can be live at no peak any more are let go as the list grows
   * (`pruneStorages`): kept until the end, a simulation's storages outlived the young generation and every
   * scavenge copied them (issue #15).
   */
  recordStorages = true;
  private readonly storages: Storage[] = [];
  /** The list's length after the last pruning. */
  private storagesKept = 0;
  /** Hears every storage allocated and freed (a step being recorded for replay: train/step-replay.ts). */
  observer: StorageObserver | null = null;
  private peakAllocated = 0;
  /** The allocation that set the peak of allocated bytes, and when it happened. */
  peak = { event: 0, step: 0, phase: 'load' };

  private readonly reductionDevice: ReductionDevice;

  /** Streaming multiprocessors (kernels that size their grids by them). */
  get multiProcessorCount(): number {
    return this.reductionDevice.multiProcessorCount;
  }

  constructor(allocator: CachingAllocator, workspaces: Workspaces, reductionDevice: ReductionDevice) {
    this.allocator = allocator;
    this.workspaces = workspaces;
    this.reductionDevice = reductionDevice;
  }

  /**
   * `at::sum_to(t, outputShape)` (a bias gradient summed over the batch, a [N, 1] statistic's over its row): the
   * result, after the reduction kernel's global-memory workspace came and went (tensor/reduce-config.ts).
   */
  sumTo(t: Tensor, outputShape: readonly number[], label: string, asView = true): Tensor {
    // `at::sum_to`: the sum keeps t's dimensions, and a view drops the leading ones (its base lives on with it,
    // so InputBuffer::accumulate does not add into it in place: measured with DoRA's magnitude, two gradients); a
    // scalar is `tensor.sum()`, no view. `asView` false: a plain sum over the dimensions (a convolution's bias
    // gradient, `grad_output.sum({0, 2, 3})`).
    const leading = asView && outputShape.length > 0 ? t.shape.length - outputShape.length : 0;
    const out = this.empty(leading > 0 ? [...new Array<number>(leading).fill(1), ...outputShape] : outputShape, t.dtype, label);
    const numOutputs = out.numel;
    this.reduction({
      numOutputs,
      inputsPerOutput: numOutputs === 0 ? 0 : t.numel / numOutputs,
      // Reduced dimensions are the innermost ones (a row sum) when the result keeps the leading extents.
      reduceFastest: outputShape.length === t.shape.length && outputShape[outputShape.length - 1] === 1 && (t.shape[t.shape.length - 1] ?? 1) > 1,
      elementBytes: DTYPE_BYTES[t.dtype],
      accumulateBytes: DTYPE_BYTES[accType(t.dtype)],
    }, label);
    if (leading <= 0) return out;
    const view = this.view(out, outputShape);
    this.release(out);
    return view;
  }

  /**
   * One CUDA reduction kernel (`gpu_reduce_kernel`): its global-memory staging buffer and semaphores, when its
   * launch splits an output across blocks, allocated for the kernel and freed after it (tensor/reduce-config.ts).
   */
  reduction(shape: ReductionShape, label: string): void {
    const [buffer, semaphores] = reductionWorkspace(shape, this.reductionDevice);
    if (buffer === 0) return;
    const b = this.empty([buffer], 'uint8', `${label}: reduction buffer`, 'workspace');
    const s = this.empty([semaphores], 'uint8', `${label}: reduction semaphores`, 'workspace');
    // freed as their DataPtrs go out of scope: the semaphores (allocated last) first, as recorded on the H100
    this.release(s);
    this.release(b);
  }

  /**
   * Every reference made while a scope is open (see `withScope`): an exception unwinding Python frames drops
   * their locals, which the simulation mirrors by releasing what the scope still holds.
   */
  private scope: Tensor[] | null = null;

  /**
   * Frames open now that free memory when an exception unwinds them: `withScope`, and an autocast region whose
   * `exit` runs in a `finally` (models/checkpointing.ts). An out-of-memory error raised while none is open frees
   * nothing before the simulation catches it (Note [Replayed steps]).
   */
  unwindingFrames = 0;

  private track(t: Tensor): Tensor {
    this.scope?.push(t);
    return t;
  }

  /** Runs fn; if it throws, every reference it made and did not release or hand on (`escape`) is released. */
  withScope<T>(fn: () => T): T {
    const outer = this.scope;
    const scope: Tensor[] = [];
    this.scope = scope;
    this.unwindingFrames++;
    try {
      return fn();
    } catch (error) {
      for (let i = scope.length - 1; i >= 0; i--) this.release(scope[i]);
      throw error;
    } finally {
      this.scope = outer;
      this.unwindingFrames--;
    }
  }

  /** Keeps a reference made inside a scope alive past an exception (it has been handed to someone). */
  escape(t: Tensor): Tensor {
    if (this.scope) {
      const i = this.scope.lastIndexOf(t);
      if (i >= 0) this.scope.splice(i, 1);
    }
    return t;
  }

  /** `at::empty`: a new tensor with its own storage. */
  empty(shape: readonly number[], dtype: DType, label: string, category: MemoryCategory = 'temporary'): Tensor {
    return this.track(new Tensor(shape, dtype, new TensorImpl(this.allocateStorage(nbytes(shape, dtype), label, category), null)));
  }

  /**
   * A storage of `size` bytes from the caching allocator (none for 0 bytes: PyTorch never allocates them). Tensors
   * get theirs through `empty`; a replayed step (train/step-replay.ts) calls it directly.
   */
  allocateStorage(size: number, label: string, category: MemoryCategory, allocatorLabel = label): Storage {
    const block = size === 0 ? null : this.allocator.malloc(size, 0, allocatorLabel);
    const storage = new Storage(size, block, label, category);
    if (block) {
      storage.serial = this.storageSerials++;
      this.changed();
      storage.allocEvent = this.events;
      if (this.recordStorages && this.storages.push(storage) > 2 * this.storagesKept + 4096) this.pruneStorages();
      this.observer?.allocated(storage, allocatorLabel);
    }
    return storage;
  }

  /**
   * A replayed allocation whose storage nothing would read (no recorder listening, no peak details: a search's
   * trials): the block alone, counted as `allocateStorage` counts a storage (train/step-replay.ts). `size` > 0.
   */
  allocateBlock(size: number, allocatorLabel: string): Block {
    const block = this.allocator.malloc(size, 0, allocatorLabel);
    this.storageSerials++;
    this.changed();
    return block;
  }

  /** `freeStorage` of a block from `allocateBlock`. */
  freeBlock(block: Block): void {
    this.allocator.free(block);
    this.changed();
  }

  /** A storage's memory goes back to the allocator (its last reference went). */
  freeStorage(s: Storage): void {
    if (!s.block) return;
    this.allocator.free(s.block);
    s.block = null;
    this.changed();
    s.freeEvent = this.events;
    this.observer?.freed(s);
  }

  /** What a storage holds changes (AccumulateGrad steals a gradient: it becomes the parameter's `.grad`). */
  rename(s: Storage, label: string, category: MemoryCategory): void {
    this.observer?.renaming(s);
    s.label = label;
    s.category = category;
  }

  /** A view: a tensor of its own (its own shape) over t's storage, keeping t alive as its base. */
  view(t: Tensor, shape: readonly number[] = t.shape): Tensor {
    return this.track(new Tensor(shape, t.dtype, new TensorImpl(t.storage, t.impl)));
  }

  /** Another reference to the same tensor (a Python name, a saved variable, an autograd buffer slot). */
  ref(t: Tensor): Tensor {
    const r = this.track(new Tensor(t.shape, t.dtype, t.impl));
    r.gradFn = t.gradFn;
    r.outputSlot = t.outputSlot;
    r.requiresGrad = t.requiresGrad;
    r.leaf = t.leaf;
    return r;
  }

  /** Drops one reference; the storage's memory goes back to the allocator with its last one. */
  release(t: Tensor | null | undefined): void {
    if (!t || t.released) return;
    t.released = true;
    this.dropImpl(t.impl);
  }

  private dropImpl(impl: TensorImpl): void {
    if (--impl.refs > 0) return;
    const s = impl.storage;
    if (--s.refs === 0) this.freeStorage(s);
    if (impl.base) this.dropImpl(impl.base);
  }

  /** `t.use_count()`: references to this tensor (a view's base does not count). */
  useCount(t: Tensor): number {
    return t.impl.refs;
  }

  /** `t.storage().use_count()`: tensors over its storage, views and their bases included. */
  storageUseCount(t: Tensor): number {
    return t.storage.refs;
  }

  /** Before a GEMM on the current thread: its workspace(s), allocated the first time, as cuBLAS does. */
  gemm(kind: GemmKind): void {
    this.ensureWorkspace(`cuBLAS workspace (${this.thread} thread)`, this.workspaces.cublasBytes);
    if (kind === 'cublaslt') this.ensureWorkspace(`cuBLASLt workspace (${this.thread} thread)`, this.workspaces.cublasLtBytes);
  }

  private ensureWorkspace(label: string, size: number): void {
    if (size === 0 || this.threadWorkspaces.has(label)) return;
    // Held by the thread's handle for the whole process, whatever scope made it.
    this.threadWorkspaces.set(label, this.escape(this.empty([size], 'uint8', label, 'workspace')));
  }

  /**
   * Storages made on first use and kept for the process (the threads' library workspaces): a step that made them is
   * the same program as the next ones but for them (Note [Replayed second step], train/second-step.ts).
   */
  processStorages(): Storage[] {
    return Array.from(this.threadWorkspaces.values(), (t) => t.storage);
  }

  /** The recorded timeline, one entry per event (engine/result/timeline.ts decimates it). */
  timeline(): RawTimeline {
    return this.timelineColumns.raw();
  }

  /**
   * Lets go of the storages freed that were not live at the peak so far: later peaks come after their free, so
   * they are live at none (`liveAtPeak` reads the rest, in the order they were allocated).
   */
  private pruneStorages(): void {
    const at = this.peak.event;
    const storages = this.storages;
    let n = 0;
    for (let i = 0; i < storages.length; i++) {
      const s = storages[i]!;
      if (s.block !== null || (s.allocEvent <= at && s.freeEvent > at)) storages[n++] = s;
    }
    storages.length = n;
    this.storagesKept = n;
  }

  /** The storages alive right after the allocation that set the peak. */
  liveAtPeak(): Storage[] {
    const at = this.peak.event;
    return this.storages.filter((s) => s.allocEvent <= at && s.freeEvent > at);
  }

  /** An allocation or a free happened: one more event, the peak, the timeline. */
  private changed(): void {
    this.events++;
    const a = this.allocator.allocatedBytes;
    if (a > this.peakAllocated) {
      this.peakAllocated = a;
      this.peak = { event: this.events, step: this.step, phase: this.phase };
    }
    if (this.recordTimeline) this.timelineColumns.push(a, this.allocator.reservedBytes, this.step, this.phase);
  }
}
