/**
 * Note [Reused blocks]: the repeated blocks of a model's forward and backward, replayed through the allocator.
 *
 * A transformer runs the same block (a decoder layer) tens of times on tensors of the same shapes: each block's
 * forward sends the allocator the same requests in the same order, and so does each block's backward; only the
 * storages differ. In the first step of a simulation the model's code runs for every block, and that code (shapes,
 * tensors, autograd nodes, reference counts) costs several times what the allocator does: about 40% of a search on
 * Llama 2 70B (issue #15). So in a run of `count` blocks of one kind (`BlockReuse`), blocks 0, 1, count - 2 and
 * count - 1 run their code, and the others replay recordings of it:
 * - a block's forward replays the recording of block 1's forward: its allocations and frees in order, the
 *   block's output a new tensor over the storage block 1's output had, and one node (`ReplayedBlock`) as the
 *   output's grad_fn, which keeps the block's input and the tensors its call was passed (`closure`) for as long
 *   as the block's code kept them;
 * - that node's backward replays the recording of block count - 2's backward (the first backward of a block
 *   whose forward ran between replayed ones): its requests, the saved storages its forward left (by their index
 *   in the forward), where it let go of the block's input, the closure and the incoming gradient (the last
 *   reference its code held: the allocator frees the storage there when nobody else holds it), the gradients it
 *   gave the block's parameters, and the gradient it passed on (a new storage or the incoming one).
 * Blocks 0 and count - 1 are not recorded: the first block is where first uses happen (the thread's cuBLAS
 * workspace at the first GEMM) and the last backward is the first (the backward thread's). Block count - 2's
 * forward must be block 1's again and block 1's backward block count - 2's again, request for request: else the
 * plan is simulated again without reuse (`BlocksNotReusable`), as it is when a recording finds something the
 * replay could not reproduce: a storage of the block kept by something outside it (an autocast cast cache, a
 * DynamicCache), a gradient flowing out of the block elsewhere than to its input, a node of another block run in
 * the middle of its backward, a tensor renamed twice.
 *
 * What a replay does not make are the storages' own labels (block 1's and block count - 2's are reused) and the
 * tensors' objects: runs whose peak contents are read run every block's code (simulate's `reuseBlocks`, on for a
 * search's trials). An out-of-memory error in a replayed block stands for the full block's where no frame that
 * frees memory on unwinding was open in the recording; where one was, the plan is simulated again without reuse,
 * as for replayed steps (Note [Replayed steps]). test/engine/models/block-reuse.test.ts compares simulations with
 * and without reuse, every field a trial reads, on the calibration and boundary-suite plans.
 */
import { Node, type Edge, type Parameter } from '../autograd/engine.ts';
import { OutOfMemoryError } from '../allocator/caching-allocator.ts';
import type { Runtime } from '../ops/runtime.ts';
import type { CudaDevice, StorageObserver } from '../tensor/cuda.ts';
import type { DType } from '../tensor/dtype.ts';
import { Tensor, TensorImpl, type MemoryCategory, type Storage } from '../tensor/tensor.ts';

/** A recording could not be replayed exactly: simulate the plan again without reusing blocks. */
export class BlocksNotReusable extends Error {
  constructor(why: string) {
    super(`blocks not reused: ${why}`);
    this.name = 'BlocksNotReusable';
    blockReuseCounts.notReusable++;
    blockReuseCounts.lastReason = why;
  }
}

/** Blocks replayed and passes given up in this process, and the last reason why (what the tests and the bench read). */
export const blockReuseCounts = { replayedForwards: 0, replayedBackwards: 0, notReusable: 0, lastReason: '' };

/** Ops of a recording, 4 codes per index: allocate storage k, free it, rename it, let go of external j. */
const kAlloc = 0;
const kFree = 1;
const kRename = 2;
const kDrop = 3;

/** What a block does with the allocator in its forward or its backward, and with what it was given. */
interface Recording {
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

interface ForwardRecording extends Recording {
  /** Per external (the block's input, then its closure): whether the block still held it after its forward. */
  readonly holds: boolean[];
  /** The output's storage (an index of the recording) and its shape and dtype. */
  readonly output: number;
  readonly outputShape: readonly number[];
  readonly outputDType: DType;
}

interface BackwardRecording extends Recording {
  /** Storages of the block's forward: indices below this are the forward's, the others the backward's own. */
  readonly forwardCount: number;
  /** Final labels and categories of renamed storages (index -> [label, category]). */
  readonly renamed: Map<number, [string, MemoryCategory]>;
  /** Gradients given to the block's parameters: (parameter index, storage index, view depth), in threes. */
  readonly grads: number[];
  /** The gradient passed on: a storage index, or -1 for the incoming gradient itself. */
  readonly output: number;
}

function sameRecording(a: Recording, b: Recording): boolean {
  return equalArrays(a.ops, b.ops) && equalArrays(a.sizes, b.sizes) && equalArrays(a.categories, b.categories) && equalArrays(a.unwinding, b.unwinding);
}

function equalArrays<T>(a: readonly T[], b: readonly T[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Hears a block's requests while its code runs (passing them on to the observer that was listening), as a
 * Recording. `forward` (for a backward): the block's forward recording and the serial of its first storage.
 */
class BlockRecorder implements StorageObserver {
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
  /** Externals whose last reference held by the block goes when their reference count reaches the threshold. */
  private readonly watched: { tensor: Tensor; threshold: number; dropped: boolean }[];

  private readonly cuda: CudaDevice;
  private readonly inner: StorageObserver | null;
  /** The block's input, the tensors its call was passed, and in a backward the incoming gradient. */
  readonly externals: readonly Tensor[];
  private readonly forward: { storages: readonly Storage[]; firstSerial: number } | null;

  /**
   * `watch` (a backward): per external, the reference count at which the block has let go of it (-1: it held
   * none); `forward`: the block's forward's storages and the serial of its first.
   */
  constructor(cuda: CudaDevice, inner: StorageObserver | null, externals: readonly Tensor[], watch: readonly number[] | null, forward: { storages: readonly Storage[]; firstSerial: number } | null) {
    this.cuda = cuda;
    this.inner = inner;
    this.externals = externals;
    this.forward = forward;
    this.firstSerial = cuda.storageSerials;
    this.outerFrames = cuda.unwindingFrames;
    this.watching = watch !== null;
    this.watched = externals.map((tensor, j) => ({ tensor, threshold: watch ? watch[j]! : -1, dropped: !watch || watch[j]! < 0 }));
  }

  /** A backward: the externals are watched for the block letting go of them. */
  private readonly watching: boolean;

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
    const frames = this.cuda.unwindingFrames - this.outerFrames;
    if (frames !== this.frames) {
      this.frames = frames;
      this.unwinding.push(this.ops.length, frames);
    }
    this.checkDrops();
  }

  /**
   * Externals whose references held by the block are gone. `done`: the recording ends, and each must be gone but
   * `passedOn` (the incoming gradient, passed on as the block's).
   */
  checkDrops(done = false, passedOn = -1): void {
    for (let j = 0; j < this.watched.length; j++) {
      const w = this.watched[j]!;
      if (w.dropped) continue;
      if (w.tensor.impl.refs <= w.threshold) {
        w.dropped = true;
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

/** The block's parameters (their `Parameter`, or null for a frozen one), by their position in the block. */
type BlockParameters = readonly (Parameter | null)[];

/** A block's forward as replayed: its node stands for the block's autograd graph (this Note). */
export class ReplayedBlock extends Node {
  readonly name = 'ReplayedBlockBackward';

  private readonly pass: BlockPass;
  /** The block's storages: its forward's, then (while its backward replays) the backward's own. */
  private readonly storages: Storage[];
  /** References to the externals the block's code held after its forward (null: none). */
  private readonly holds: (Tensor | null)[];
  private readonly params: BlockParameters;

  constructor(seq: number, inputEdge: Edge | null, pass: BlockPass, storages: Storage[], holds: (Tensor | null)[], params: BlockParameters) {
    super(seq, [inputEdge], 1);
    this.pass = pass;
    this.storages = storages;
    this.holds = holds;
    this.params = params;
  }

  apply(grads: (Tensor | null)[]): (Tensor | null)[] {
    const incoming = grads[0] ?? null;
    grads[0] = null; // the block takes the engine's reference to the incoming gradient, and lets it go as recorded
    const b = this.pass.backwardTemplate();
    if (!incoming) throw new BlocksNotReusable('a replayed block got no gradient');
    const { cuda } = this.pass.rt;
    const externals: (Tensor | null)[] = [...this.holds, incoming];
    const storages = this.storages;
    storages.length = b.forwardCount;
    replayOps(cuda, b, storages, externals, (k) => {
      const r = b.renamed.get(k)!;
      cuda.rename(storages[k]!, r[0], r[1]);
    });
    const g = b.grads;
    for (let i = 0; i < g.length; i += 3) {
      const param = this.params[g[i]!]!;
      const s = storages[g[i + 1]!]!;
      let impl = new TensorImpl(s, null);
      for (let v = 1; v < g[i + 2]!; v++) impl = new TensorImpl(s, impl);
      param.grad = new Tensor(param.tensor.shape, param.tensor.dtype, impl);
    }
    blockReuseCounts.replayedBackwards++;
    const edge = this.next[0]!;
    const out = b.output < 0 ? incoming : new Tensor(edge.shape, edge.dtype, new TensorImpl(storages[b.output]!, null));
    storages.length = 0;
    return [out];
  }

  releaseVariables(): void {}
}

/**
 * Replays a recording's ops: allocations into `storages` (forward storages first, as the recording indexes
 * them), frees, renames (`rename`), and letting go of externals (`externals[j]`, released).
 */
function replayOps(cuda: CudaDevice, r: Recording & { forwardCount?: number }, storages: Storage[], externals: (Tensor | null)[], rename: (k: number) => void): void {
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
          storages[k] = cuda.allocateStorage(r.sizes[own]!, r.labels[own]!, r.categories[own]!, r.allocatorLabels[own]!);
          break;
        }
        case kFree:
          cuda.freeStorage(storages[k]!);
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

/** How a model runs its blocks, for reuse: whether every block is the same (the same code on the same shapes). */
export interface BlockReuse {
  /** A key per block: blocks with equal keys run the same code on the same shapes (all must be equal). */
  kind(i: number): string;
  /** The block's parameters' tensors, in one order for every block. */
  weights(i: number): readonly Tensor[];
}

/** Blocks replayed at most this many from the ends: 0 and 1, count - 2 and count - 1 run their code. */
const kRealAtEachEnd = 2;

/** A recorded block's forward: the recording, its storages and what it was given and made. */
interface ForwardRun {
  recording: ForwardRecording;
  storages: readonly Storage[];
  firstSerial: number;
  input: Tensor;
  externals: readonly Tensor[];
  /** References to each external the block held after its forward. */
  holdCounts: readonly number[];
  out: Tensor;
  params: BlockParameters;
}

/** A recorded block's backward while it runs. */
interface BackwardRun {
  rec: BlockRecorder;
  /** The block's autograd tag, and the depth of the backward its nodes run in. */
  block: number;
  depth: number;
  /** The node the block's input gradient goes to, and which of its outputs the input is. */
  inputNode: Node | null;
  inputSlot: number;
  params: BlockParameters;
  /** Which parameters had a gradient when the backward began (a later micro-step adds into it). */
  hadGrad: boolean[];
  forward: ForwardRun;
  /** The observer listening before the recording. */
  observer: StorageObserver | null;
}

/** Tags of the blocks recorded, unique across passes (Autograd.block). */
let nextTag = 1;

/**
 * One forward's run of blocks and the backward after it (this Note): which blocks run their code, the
 * recordings, and the replayed blocks' nodes.
 */
export class BlockPass {
  private template: ForwardRecording | null = null;
  /** Blocks 1 and count - 2's forwards (their backwards index their storages). */
  private firstForward: ForwardRun | null = null;
  private lastForward: ForwardRun | null = null;
  /** Block count - 2's backward: what the replayed blocks replay. */
  private backward: BackwardRecording | null = null;
  /** The backward being recorded now: of block count - 2 (the template), then of block 1 (checked against it). */
  private recording: BackwardRun | null = null;
  private checked = false;

  /** Autograd tags of the blocks recorded are tagBase + their index. */
  private readonly tagBase: number;

  readonly rt: Runtime;
  private readonly count: number;
  private readonly reuse: BlockReuse;

  constructor(rt: Runtime, count: number, reuse: BlockReuse) {
    this.rt = rt;
    this.count = count;
    this.reuse = reuse;
    this.tagBase = nextTag;
    nextTag += count;
  }

  /**
   * A pass for `count` blocks when reuse applies (null: every block runs its code): a run whose peak contents are
   * not read (`Runtime.reuseBlocks`), enough blocks, all of one kind, and no autocast region (its cast cache keeps
   * each block's casts of its weights until the forward ends).
   */
  static of(rt: Runtime, count: number, reuse: BlockReuse | undefined): BlockPass | null {
    if (!reuse || !rt.reuseBlocks || rt.autocast !== null || count <= 2 * kRealAtEachEnd) return null;
    const kind = reuse.kind(0);
    for (let i = 1; i < count; i++) if (reuse.kind(i) !== kind) return null;
    return new BlockPass(rt, count, reuse);
  }

  /** Whether block i replays a recording (else it runs its code). */
  replays(i: number): boolean {
    return i >= kRealAtEachEnd && i < this.count - kRealAtEachEnd;
  }

  private paramsOf(i: number): BlockParameters {
    return this.reuse.weights(i).map((t) => t.leaf);
  }

  /** Runs block i's code (`run`), recording its forward where this Note needs it. */
  runForward(i: number, input: Tensor, externals: readonly Tensor[], run: () => Tensor): Tensor {
    const { cuda, autograd } = this.rt;
    const recorded = i === 1 || i === this.count - 2;
    if (!recorded) return run();
    const before = externals.map((t) => t.impl.refs);
    const observer = cuda.observer;
    const rec = new BlockRecorder(cuda, observer, externals, null, null);
    cuda.observer = rec;
    const outerBlock = autograd.block;
    autograd.block = this.tagBase + i;
    let out: Tensor;
    try {
      out = run();
    } finally {
      cuda.observer = observer;
      autograd.block = outerBlock;
    }
    const k = rec.indexOf(out.storage);
    if (k < 0 || out.impl.base !== null || out.impl.refs !== 1 || out.storage.refs !== 1 || out.gradFn === null) rec.failure ??= "the block's output is not a tensor of its own";
    const holds = externals.map((t, j) => t.impl.refs - before[j]!);
    if (holds.some((h) => h < 0)) rec.failure ??= 'the block let go of a reference it was given';
    if (cuda.convPlans.size > 0) rec.failure ??= 'convolution plans';
    if (rec.failure) throw new BlocksNotReusable(rec.failure);
    const recording: ForwardRecording = { ...recordingOf(rec), holds: holds.map((h) => h > 0), output: k, outputShape: out.shape, outputDType: out.dtype };
    const kept: ForwardRun = { recording, storages: rec.ownStorages, firstSerial: rec.firstOwnSerial, input, externals, holdCounts: holds, out, params: this.paramsOf(i) };
    if (i === 1) {
      this.template = recording;
      this.firstForward = kept;
    } else {
      const t = this.template;
      if (!t || !sameRecording(t, recording) || t.output !== recording.output || !equalArrays(t.holds, recording.holds)) throw new BlocksNotReusable(`block ${i}'s forward differs from block 1's`);
      this.lastForward = kept;
      // the backward recordings start with the first node of these blocks' backward
      this.rt.autograd.listener = this;
    }
    return out;
  }

  /** Block i's forward, replayed from block 1's (this Note): its output, whose grad_fn stands for the block. */
  replayForward(i: number, input: Tensor, externals: readonly Tensor[]): Tensor {
    const t = this.template;
    if (!t) throw new BlocksNotReusable('no forward recorded');
    const { cuda, autograd } = this.rt;
    const holds = externals.map((x, j) => (t.holds[j] ? cuda.ref(x) : null));
    const storages: Storage[] = [];
    replayOps(cuda, t, storages, [], () => {
      throw new BlocksNotReusable('a rename in a forward');
    });
    blockReuseCounts.replayedForwards++;
    const out = new Tensor(t.outputShape, t.outputDType, new TensorImpl(storages[t.output]!, null));
    const node = new ReplayedBlock(autograd.nextSequenceNr(), autograd.edge(input), this, storages, holds, this.paramsOf(i));
    out.gradFn = node;
    out.outputSlot = 0;
    return out;
  }

  /** The backward recording the replayed blocks replay. */
  backwardTemplate(): BackwardRecording {
    if (!this.backward) throw new BlocksNotReusable('no backward recorded before a replayed block ran');
    return this.backward;
  }

  /** The engine is about to apply `node` (Autograd.listener): a recorded block's backward begins or ends. */
  applying(node: Node, inputs: readonly (Tensor | null)[], depth: number): void {
    const r = this.recording;
    if (r) {
      // a reentrant checkpoint's backward runs inside its node's: all of it is the block's
      if (depth > r.depth) return;
      if (node.block === r.block || (node.param !== null && r.params.includes(node.param))) {
        this.checkEdges(node, r);
        return;
      }
      this.endBackward(node, inputs);
    }
    if (this.checked) return;
    const forward = !this.backward ? this.lastForward : this.firstForward;
    if (forward && node === forward.out.gradFn) this.beginBackward(node, inputs, depth, forward);
  }

  finished(): void {
    this.rt.autograd.listener = null;
    if (this.recording) throw new BlocksNotReusable('the backward ended inside a recorded block');
    if (this.backward && !this.checked) throw new BlocksNotReusable("block 1's backward was not compared with the replayed one");
  }

  private beginBackward(node: Node, inputs: readonly (Tensor | null)[], depth: number, forward: ForwardRun): void {
    const { cuda } = this.rt;
    const incoming = inputs[forward.out.outputSlot] ?? null;
    if (!incoming || incoming.impl.refs !== 1 || incoming.storage.refs !== 1) throw new BlocksNotReusable('the incoming gradient is held elsewhere');
    const holdCounts = forward.holdCounts;
    const externals = [...forward.externals, incoming];
    // an external is let go of once its references are down to those others hold (none left for the gradient)
    const watch = [...forward.externals.map((t, j) => (holdCounts[j]! > 0 ? t.impl.refs - holdCounts[j]! : -1)), 0];
    const observer = cuda.observer;
    const rec = new BlockRecorder(cuda, observer, externals, watch, { storages: forward.storages, firstSerial: forward.firstSerial });
    cuda.observer = rec;
    const inputNode = forward.input.gradFn;
    this.recording = {
      rec,
      block: node.block,
      depth,
      inputNode,
      inputSlot: forward.input.outputSlot,
      params: forward.params,
      hadGrad: forward.params.map((p) => p !== null && p.grad !== null),
      forward,
      observer,
    };
    this.checkEdges(node, this.recording);
  }

  /** A node of the recorded block sends gradients only within the block, to its parameters or to its input. */
  private checkEdges(node: Node, r: BackwardRun): void {
    for (const e of node.next) {
      if (!e) continue;
      const m = e.node;
      if (m.block === r.block || m === r.inputNode || (m.param !== null && r.params.includes(m.param))) continue;
      r.rec.failure ??= `a gradient leaves the block for ${m.name}`;
    }
  }

  private endBackward(next: Node, inputs: readonly (Tensor | null)[]): void {
    const r = this.recording!;
    this.recording = null;
    const { cuda } = this.rt;
    cuda.observer = r.observer;
    const rec = r.rec;
    // the gradient passed on, in the buffer of the input's node: a storage the backward made, or the incoming one
    const inputNode = r.inputNode;
    const buffer = next === inputNode ? inputs : inputNode?.buffer;
    const passed = buffer?.[r.inputSlot] ?? null;
    const incomingIndex = rec.externals.length - 1;
    let output = -1;
    if (!passed || passed.impl.refs !== 1 || passed.storage.refs !== 1 || passed.impl.base !== null) rec.failure ??= 'the gradient passed on is held elsewhere';
    else if (passed.storage !== rec.externals[incomingIndex]!.storage) {
      output = rec.indexOf(passed.storage);
      if (output < rec.forwardCount) rec.failure ??= 'the gradient passed on is not a storage of the backward';
    }
    rec.checkDrops(true, output === -1 ? incomingIndex : -1);
    // every storage the forward left, but its output, is freed in the backward
    const fwd = r.forward;
    for (let k = 0; k < fwd.storages.length; k++) {
      const s = fwd.storages[k]!;
      if (s.block !== null && k !== fwd.recording.output) rec.failure ??= `a storage of the block's forward outlives its backward (${s.label})`;
    }
    const grads: number[] = [];
    r.params.forEach((p, j) => {
      if (!p || r.hadGrad[j] || p.grad === null) return;
      let views = 0;
      for (let impl: TensorImpl | null = p.grad.impl; impl; impl = impl.base, views++) if (impl.refs !== 1 || impl.storage !== p.grad.storage) rec.failure ??= 'a gradient with other references';
      const k = rec.indexOf(p.grad.storage);
      if (k < rec.forwardCount || p.grad.storage.refs !== views) rec.failure ??= 'a gradient not made in the backward';
      grads.push(j, k, views);
    });
    for (const k of rec.ownStorages.keys()) {
      const s = rec.ownStorages[k]!;
      const index = rec.forwardCount + k;
      if (s.block !== null && index !== output && !grads.some((x, i) => i % 3 === 1 && x === index)) rec.failure ??= `a storage of the block's backward outlives it (${s.label})`;
    }
    if (rec.failure) throw new BlocksNotReusable(rec.failure);
    const renamed = new Map<number, [string, MemoryCategory]>();
    for (const k of rec.renamedAt) {
      const s = k < rec.forwardCount ? fwd.storages[k]! : rec.ownStorages[k - rec.forwardCount]!;
      renamed.set(k, [s.label, s.category]);
    }
    const recording: BackwardRecording = { ...recordingOf(rec), forwardCount: rec.forwardCount, renamed, grads, output };
    if (!this.backward) {
      this.backward = recording;
      return;
    }
    const t = this.backward;
    const sameRenames = t.renamed.size === renamed.size && [...t.renamed].every(([k, [, c]]) => renamed.get(k)?.[1] === c);
    if (!sameRecording(t, recording) || t.forwardCount !== recording.forwardCount || !equalArrays(t.grads, recording.grads) || t.output !== recording.output || !sameRenames) {
      throw new BlocksNotReusable("block 1's backward differs from the replayed one");
    }
    this.checked = true;
  }
}

function recordingOf(rec: BlockRecorder): Recording {
  return { ops: rec.ops, sizes: rec.sizes, labels: rec.labels, allocatorLabels: rec.allocatorLabels, categories: rec.categories, unwinding: rec.unwinding };
}
