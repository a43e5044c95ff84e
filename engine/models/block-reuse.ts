/**
 * Note [Reused blocks]: the repeated blocks of a model's forward and backward, replayed through the allocator.
 *
 * A transformer runs the same block (a decoder layer) tens of times on tensors of the same shapes: each block's
 * forward sends the allocator the same requests in the same order, and so does each block's backward; only the
 * storages differ. In the first step of a simulation the model's code runs for every block, and that code (shapes,
 * tensors, autograd nodes, reference counts) costs several times what the allocator does: about 40% of a search on
 * Llama 2 70B (issue #15). So among the blocks of one kind in a run (`BlockPasses`: GPT-2's blocks, BERT's, ViT's, the
 * Llama family's decoder layers, Gemma's sliding and its global layers; a kind is the model's `BlockReuse.kind`, the
 * weights' shapes, dtypes and training, and the neighbours' kinds), the first two and the last two run their code,
 * and the others replay recordings (below, "block 1" is the kind's second, "block count - 2" its second to last):
 * - a block's forward replays the recording of block 1's forward: its allocations and frees in order, the
 *   block's output a new tensor over the storage block 1's output had, and one node (`ReplayedBlock`) as the
 *   output's grad_fn, which keeps the block's input and the tensors its call was passed (`closure`) for as long
 *   as the block's code kept them, and the storages the forward left that the block's code holds; what holders
 *   outside the block keep (the autocast cache's casts of its weights, a DynamicCache's keys and values:
 *   `BlockReuse.kept`) they are given, as tensors of their own;
 * - that node's backward replays the recording of block count - 2's backward (the first backward of a block
 *   whose forward ran between replayed ones): its requests, the storages its forward left (by their index in the
 *   forward), where it let go of the block's input, the closure and the incoming gradient (the last reference its
 *   code held: the allocator frees the storage there when nobody else holds it), the gradients it gave the block's
 *   parameters, and the gradient it passed on (a new storage or the incoming one).
 * The storages get their labels with the block's module path made the replayed block's (`relabel`), where the
 * labels are read (peak details). Blocks 0 and count - 1 are not recorded: the first block is where first uses
 * happen (the thread's cuBLAS workspace at the first GEMM) and the last block's backward is the first (the backward
 * thread's). Block count - 2's forward must be block 1's again and block 1's backward block count - 2's again,
 * request for request, label for label (relabelled): else the plan is simulated again without reuse
 * (`BlocksNotReusable`), as it is when a recording finds something the replay could not reproduce: a storage of
 * the block kept by a holder outside it the model does not name, a gradient flowing out of the block elsewhere
 * than to its input, a node of the block run after another block's, a tensor renamed twice.
 *
 * An out-of-memory error in a replayed block stands for the full block's where no frame that frees memory on
 * unwinding was open in the recording; where one was, the plan is simulated again without reuse, as for replayed
 * steps (Note [Replayed steps]). A simulation under a trace (`onTrace`) runs every block's code.
 * test/engine/models/block-reuse.test.ts compares simulations with and without reuse, every field, with peak
 * details and without, on the calibration and boundary-suite plans and under caps that run out inside replayed
 * blocks.
 */
import { Node, type Edge, type Parameter } from '../autograd/engine.ts';
import type { Runtime } from '../ops/runtime.ts';
import type { StorageObserver } from '../tensor/cuda.ts';
import { Tensor, TensorImpl, type MemoryCategory, type Storage } from '../tensor/tensor.ts';
import { BlockRecorder, BlocksNotReusable, blockReuseCounts, equalArrays, kFree, namesFor, recordingOf, relabel, replayOps, sameEntries, sameMemoryOrder, sameNames, sameRecording, type BackwardRecording, type ForwardRecording, type OutsideEntry } from './block-recording.ts';

export { BlocksNotReusable, blockReuseCounts, relabel };

/** The block's parameters (their `Parameter`, or null for a frozen one), by their position in the block. */
type BlockParameters = readonly (Parameter | null)[];

/** A block's forward as replayed: its node stands for the block's autograd graph (this Note). */
export class ReplayedBlock extends Node {
  readonly name = 'ReplayedBlockBackward';

  private readonly pass: BlockKindPass;
  /** The block's storages: its forward's, then (while its backward replays) the backward's own. */
  private readonly storages: Storage[];
  /** The block's references to the storages its forward left (null: none), by index. */
  private readonly own: (Tensor | null)[];
  /** References to the externals the block's code held after its forward (null: none). */
  private readonly holds: (Tensor | null)[];
  private readonly params: BlockParameters;
  /** The block's index in the run. */
  private readonly index: number;

  constructor(seq: number, inputEdge: Edge | null, pass: BlockKindPass, index: number, storages: Storage[], own: (Tensor | null)[], holds: (Tensor | null)[], params: BlockParameters) {
    super(seq, [inputEdge], 1);
    this.pass = pass;
    this.index = index;
    this.storages = storages;
    this.own = own;
    this.holds = holds;
    this.params = params;
  }

  apply(grads: (Tensor | null)[]): (Tensor | null)[] {
    const incoming = grads[0] ?? null;
    grads[0] = null; // the block takes the engine's reference to the incoming gradient, and lets it go as recorded
    const b = this.pass.backwardTemplate();
    const { from, to } = this.pass.backwardNames(this.index);
    if (!incoming) throw new BlocksNotReusable('a replayed block got no gradient');
    const { cuda } = this.pass.rt;
    const externals: (Tensor | null)[] = [...this.holds, incoming];
    const storages = this.storages;
    storages.length = b.forwardCount;
    replayOps(cuda, b, namesFor(b, from, to), storages, externals, this.own, (k) => {
      const r = b.renamed.get(k)!;
      cuda.rename(storages[k]!, relabel(r[0], from, to), r[1]);
    });
    const g = b.grads;
    for (let i = 0; i < g.length; i += 3) {
      const param = this.params[g[i]!];
      if (!param) throw new BlocksNotReusable("a replayed block's weight does not train where the recorded one's does");
      const s = storages[g[i + 1]!]!;
      let impl = new TensorImpl(s, null);
      for (let v = 1; v < g[i + 2]!; v++) impl = new TensorImpl(s, impl);
      param.grad = new Tensor(param.tensor.shape, param.tensor.dtype, impl);
    }
    blockReuseCounts.replayedBackwards++;
    const edge = this.next[0]!;
    let out = incoming;
    if (b.output >= 0) {
      out = new Tensor(edge.shape, edge.dtype, new TensorImpl(storages[b.output]!, null));
      out.impl.memoryOrder = b.outputMemoryOrder;
    }
    storages.length = 0;
    return [out];
  }

  releaseVariables(): void {}
}

/** What runBlocks needs of a model to reuse its blocks (this Note). */
export interface BlockReuse {
  /**
   * A key per block for every way the model's code branches on the block's index (its weights' shapes, dtypes and
   * whether they train are compared besides): blocks of equal keys are of one kind. A replayed block stands for
   * code that did not run, so a branch the key misses is a wrong answer, not a fallback.
   */
  kind(i: number): string;
  /** The block's module path (`model.layers.3`): its storages' labels name it. */
  name(i: number): string;
  /** The block's parameters' tensors, in one order for every block. */
  weights(i: number): readonly Tensor[];
  /** Where the model keeps tensors of its blocks until its forward ends (a DynamicCache's keys and values). */
  kept?: Tensor[];
}

/**
 * A block's weights as a key: their shapes, dtypes and which train (a frozen one has no Parameter: a block with
 * other frozen weights, or another LoRA adapter, records another graph). Blocks with different keys are not reused.
 */
function weightsKey(weights: readonly Tensor[]): string {
  let key = '';
  for (const w of weights) key += `${w.shape.join('x')}:${w.dtype}:${w.leaf ? 't' : 'f'},`;
  return key;
}

/** A kind's blocks at each end that run their code (by position among them: 0 and 1, count - 2 and count - 1). */
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
  /** The block's autograd tag (`Node.blockTag`), and the depth of the backward its nodes run in. */
  tag: number;
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
  /** `CudaDevice.convPlanRuns` when the backward began. */
  convPlanRuns: number;
}

/** Tags of the blocks recorded, unique across runs of blocks (Autograd.blockTag). */
let nextTag = 1;

/**
 * A run of blocks (runBlocks) whose blocks of one kind are reused (this Note): a BlockKindPass per kind with enough
 * blocks (Gemma's sliding and global layers are two kinds), heard by autograd as one listener.
 */
export class BlockPasses {
  private readonly rt: Runtime;
  private readonly passes: BlockKindPass[];
  /** Each reused block's pass, by its index. */
  private readonly byBlock = new Map<number, BlockKindPass>();

  private constructor(rt: Runtime, groups: number[][], reuse: BlockReuse) {
    this.rt = rt;
    const tagBase = nextTag;
    nextTag += groups.reduce((n, g) => Math.max(n, ...g), 0) + 1;
    this.passes = groups.map((members) => new BlockKindPass(rt, members, reuse, tagBase));
    this.passes.forEach((pass, k) => {
      for (const i of groups[k]!) this.byBlock.set(i, pass);
    });
    rt.autograd.listener = this;
  }

  /**
   * The passes for `count` blocks when reuse applies (null: every block runs its code): a run whose storages'
   * labels can be named (`Runtime.reuseBlocks`), with more than 2 * kRealAtEachEnd blocks of one kind. A block's
   * kind is its key (the model's `kind` and its weights' shapes, dtypes and training) between its neighbours' keys:
   * the first and the last block are each of a kind of their own.
   */
  static of(rt: Runtime, count: number, reuse: BlockReuse | undefined): BlockPasses | null {
    if (!reuse || !rt.reuseBlocks || count <= 2 * kRealAtEachEnd) return null;
    const keys = Array.from({ length: count }, (_, i) => `${reuse.kind(i)}|${weightsKey(reuse.weights(i))}`);
    const byKind = new Map<string, number[]>();
    for (let i = 0; i < count; i++) {
      // a block between blocks of other kinds gets and gives its gradients otherwise (a frozen neighbour)
      const key = `${keys[i - 1] ?? ''}/${keys[i]}/${keys[i + 1] ?? ''}`;
      const members = byKind.get(key);
      if (members) members.push(i);
      else byKind.set(key, [i]);
    }
    const groups = [...byKind.values()].filter((g) => g.length > 2 * kRealAtEachEnd);
    return groups.length ? new BlockPasses(rt, groups, reuse) : null;
  }

  /** Whether block i replays a recording (else it runs its code). */
  replays(i: number): boolean {
    return this.byBlock.get(i)?.replays(i) ?? false;
  }

  /** Runs block i's code (`run`), recording its forward where its pass needs it. */
  runForward(i: number, input: Tensor, externals: readonly Tensor[], run: () => Tensor): Tensor {
    const pass = this.byBlock.get(i);
    return pass ? pass.runForward(i, input, externals, run) : run();
  }

  /** Block i's forward, replayed (`replays(i)`). */
  replayForward(i: number, input: Tensor, externals: readonly Tensor[]): Tensor {
    return this.byBlock.get(i)!.replayForward(i, input, externals);
  }

  /**
   * Autograd's listener: each pass hears every node. A recording ends at the first node not of its block, before
   * another begins (a recorder restores the observer it found).
   */
  applying(node: Node, inputs: (Tensor | null)[], depth: number): void {
    for (const pass of this.passes) pass.ending(node, inputs, depth);
    for (const pass of this.passes) pass.beginning(node, inputs, depth);
  }

  finished(): void {
    this.rt.autograd.listener = null;
    for (const pass of this.passes) pass.finished();
  }
}

/**
 * The blocks of one kind in one forward and the backward after it (this Note): which run their code, the
 * recordings, and the replayed blocks' nodes. `members`: the blocks' indices in the run, in order; the first two
 * and the last two (by position among the members: `first` is the second, `last` the second to last) run their code.
 */
export class BlockKindPass {
  private template: ForwardRecording | null = null;
  /** Blocks 1 and count - 2's forwards (their backwards index their storages). */
  private firstForward: ForwardRun | null = null;
  private lastForward: ForwardRun | null = null;
  /** Block count - 2's backward: what the replayed blocks replay. */
  private backward: BackwardRecording | null = null;
  /** The backward being recorded now: of block count - 2 (the template), then of block 1 (checked against it). */
  private recording: BackwardRun | null = null;
  /** The tags of the blocks whose backward was recorded and is over: none of their nodes may run again. */
  private readonly ended = new Set<number>();
  private checked = false;

  /** Autograd tags of the blocks recorded are tagBase + their index. */
  private readonly tagBase: number;

  readonly rt: Runtime;
  private readonly reuse: BlockReuse;
  /** Each member's position among the members, by its index in the run. */
  private readonly position: Map<number, number>;
  private readonly count: number;
  /** The members whose forward is the template and checks it (`first`), whose backward is and checks it (`last`). */
  private readonly first: number;
  private readonly last: number;

  /** Whether the storages' labels are read (peak details, a recorded run): replays then name their block. */
  private readonly labelled: boolean;

  constructor(rt: Runtime, members: readonly number[], reuse: BlockReuse, tagBase: number) {
    this.rt = rt;
    this.reuse = reuse;
    this.position = new Map(members.map((i, p) => [i, p]));
    this.count = members.length;
    this.first = members[1]!;
    this.last = members[members.length - 2]!;
    this.labelled = rt.blockLabels ?? rt.cuda.recordStorages;
    this.tagBase = tagBase;
  }

  /** Whether block i (a member) replays a recording (else it runs its code). */
  replays(i: number): boolean {
    const p = this.position.get(i)!;
    return p >= kRealAtEachEnd && p < this.count - kRealAtEachEnd;
  }

  /** Runs block i's code (`run`), recording its forward where this Note needs it. */
  runForward(i: number, input: Tensor, externals: readonly Tensor[], run: () => Tensor): Tensor {
    const { cuda, autograd } = this.rt;
    const recorded = i === this.first || i === this.last;
    if (!recorded) return run();
    const before = externals.map((t) => t.impl.refs);
    const cachedBefore = this.rt.autocast?.cachedCount ?? 0;
    const withoutGradBefore = autograd.reentrantBlocksWithoutGrad;
    const keptBefore = this.reuse.kept?.length ?? 0;
    const convPlanRunsBefore = cuda.convPlanRuns;
    const observer = cuda.observer;
    const rec = new BlockRecorder(cuda, observer, externals, null, null);
    cuda.observer = rec;
    const outerTag = autograd.blockTag;
    autograd.blockTag = this.tagBase + i;
    let out: Tensor;
    try {
      out = run();
    } finally {
      cuda.observer = observer;
      autograd.blockTag = outerTag;
    }
    const k = rec.indexOf(out.storage);
    if (k < 0 || out.impl.base !== null || out.impl.refs !== 1 || out.storage.refs !== 1) rec.failure ??= "the block's output is not a tensor of its own";
    const holds = externals.map((t, j) => t.impl.refs - before[j]!);
    if (holds.some((h) => h < 0)) rec.failure ??= 'the block let go of a reference it was given';
    // cuDNN's plan fallback asks the allocator, a cached plan's too (Note [Replayed steps]): a block with
    // convolutions is not replayed
    if (cuda.convPlanRuns !== convPlanRunsBefore) rec.failure ??= 'convolutions in the block';
    // what holders outside the block keep of it: the autocast cache's casts of its weights, the model's list
    const weights = this.reuse.weights(i);
    const entry = (t: Tensor, weight: number): OutsideEntry => {
      const at = rec.indexOf(t.storage);
      if (at < 0) rec.failure ??= 'a holder outside the block keeps a tensor the block did not make';
      return { k: at, weight, shape: t.shape, dtype: t.dtype };
    };
    const cachedTensors = this.rt.autocast?.cachedSince(cachedBefore) ?? [];
    const cached = cachedTensors.map(([key, t]) => {
      const weight = weights.findIndex((w) => w.storage === key);
      if (weight < 0) rec.failure ??= "a cast cached for a weight not the block's";
      return entry(t, weight);
    });
    const keptTensors = this.reuse.kept?.slice(keptBefore) ?? [];
    const kept = keptTensors.map((t) => entry(t, -1));
    // A storage the forward left is the block's own (its backward frees it) unless what holds it is only the
    // outside holders' tensors: one TensorImpl over it, held by those tensors alone.
    const outsideTensors = [...cachedTensors.map(([, t]) => t), ...keptTensors];
    const blockHeld = rec.ownStorages.map((s, at) => {
      if (s.block === null || at === k) return false;
      const outside = outsideTensors.filter((t) => t.storage === s);
      if (outside.length === 0) return true;
      const impl = outside[0]!.impl;
      const outsideOnly = s.refs === 1 && impl.base === null && outside.every((t) => t.impl === impl) && impl.refs === outside.length;
      return !outsideOnly;
    });
    if (rec.failure) throw new BlocksNotReusable(rec.failure);
    const recording: ForwardRecording = {
      ...recordingOf(rec),
      holds: holds.map((h) => h > 0),
      blockHeld,
      cached,
      kept,
      output: k,
      outputShape: out.shape,
      outputDType: out.dtype,
      outputMemoryOrder: out.impl.memoryOrder,
      graph: out.gradFn !== null,
      withoutGrad: autograd.reentrantBlocksWithoutGrad - withoutGradBefore,
    };
    const forward: ForwardRun = { recording, storages: rec.ownStorages, firstSerial: rec.firstOwnSerial, input, externals, holdCounts: holds, out, params: weights.map((w) => w.leaf) };
    if (i === this.first) {
      this.template = recording;
      this.firstForward = forward;
    } else {
      const t = this.template;
      const same = t && t.graph === recording.graph && t.withoutGrad === recording.withoutGrad && sameRecording(t, recording) && sameNames(namesFor(t, this.reuse.name(this.first), this.reuse.name(i)), recording) && t.output === recording.output && sameMemoryOrder(t.outputMemoryOrder, recording.outputMemoryOrder) && equalArrays(t.holds, recording.holds) && equalArrays(t.blockHeld, recording.blockHeld) && sameEntries(t.cached, recording.cached) && sameEntries(t.kept, recording.kept);
      if (!same) throw new BlocksNotReusable(`block ${i}'s forward differs from block ${this.first}'s`);
      this.lastForward = forward;
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
    const names = this.labelled ? namesFor(t, this.reuse.name(this.first), this.reuse.name(i)) : t;
    replayOps(cuda, t, names, storages, [], null, () => {
      throw new BlocksNotReusable('a rename in a forward');
    });
    blockReuseCounts.replayedForwards++;
    autograd.reentrantBlocksWithoutGrad += t.withoutGrad;
    // the block's own references to what its forward left, one per storage; the outside holders' tensors
    const own = t.blockHeld.map((held, k) => (held ? new Tensor([storages[k]!.nbytes], 'uint8', new TensorImpl(storages[k]!, null)) : null));
    const weights = this.reuse.weights(i);
    for (const c of t.cached) this.rt.autocast!.keep(weights[c.weight]!.storage, new Tensor(c.shape, c.dtype, new TensorImpl(storages[c.k]!, null)));
    for (const c of t.kept) this.reuse.kept!.push(new Tensor(c.shape, c.dtype, new TensorImpl(storages[c.k]!, null)));
    const out = new Tensor(t.outputShape, t.outputDType, new TensorImpl(storages[t.output]!, null));
    out.impl.memoryOrder = t.outputMemoryOrder;
    if (t.graph) {
      out.gradFn = new ReplayedBlock(autograd.nextSequenceNr(), autograd.edge(input), this, i, storages, own, holds, weights.map((w) => w.leaf));
      out.outputSlot = 0;
    }
    return out;
  }

  /**
   * The module paths a replayed backward's labels are rewritten between (the same when nothing reads the labels:
   * no peak details, `labelled`).
   */
  backwardNames(i: number): { from: string; to: string } {
    const from = this.reuse.name(this.last);
    return { from, to: this.labelled ? this.reuse.name(i) : from };
  }

  /** The backward recording the replayed blocks replay. */
  backwardTemplate(): BackwardRecording {
    if (!this.backward) throw new BlocksNotReusable('no backward recorded before a replayed block ran');
    return this.backward;
  }

  /**
   * The engine is about to apply `node`: the block whose backward is recorded goes on, or has ended (its
   * recording ends: every pass ends its recording before any begins one, `beginning`).
   */
  ending(node: Node, inputs: readonly (Tensor | null)[], depth: number): void {
    const r = this.recording;
    if (!r) {
      if (this.ended.has(node.blockTag)) throw new BlocksNotReusable("a node of a recorded block's backward ran after another block's");
      return;
    }
    // a reentrant checkpoint's backward runs inside its node's: all of it is the block's
    if (depth > r.depth) return;
    if (node.blockTag === r.tag || (node.param !== null && r.params.includes(node.param))) this.checkEdges(node, r);
    else this.endBackward(node, inputs);
  }

  /** The engine is about to apply `node`: the backward of a block this pass records begins with it. */
  beginning(node: Node, inputs: readonly (Tensor | null)[], depth: number): void {
    if (this.recording || this.checked) return;
    const forward = !this.backward ? this.lastForward : this.firstForward;
    if (forward && node === forward.out.gradFn) this.beginBackward(node, inputs, depth, forward);
  }

  finished(): void {
    if (this.recording) throw new BlocksNotReusable('the backward ended inside a recorded block');
    if (this.backward && !this.checked) throw new BlocksNotReusable(`block ${this.first}'s backward was not compared with the replayed one`);
  }

  private beginBackward(node: Node, inputs: readonly (Tensor | null)[], depth: number, forward: ForwardRun): void {
    const { cuda } = this.rt;
    const incoming = inputs[forward.out.outputSlot] ?? null;
    if (!incoming || incoming.impl.refs !== 1 || incoming.storage.refs !== 1) throw new BlocksNotReusable('the incoming gradient is held elsewhere');
    const holdCounts = forward.holdCounts;
    const externals = [...forward.externals, incoming];
    // an external is let go of once its references are down to those others hold (none left for the gradient)
    const watch = [...forward.externals.map((t, j) => (holdCounts[j]! > 0 ? t.impl.refs - holdCounts[j]! : null)), 0];
    const observer = cuda.observer;
    const rec = new BlockRecorder(cuda, observer, externals, watch, { storages: forward.storages, firstSerial: forward.firstSerial });
    cuda.observer = rec;
    const inputNode = forward.input.gradFn;
    this.recording = {
      rec,
      tag: node.blockTag,
      depth,
      inputNode,
      inputSlot: forward.input.outputSlot,
      params: forward.params,
      hadGrad: forward.params.map((p) => p !== null && p.grad !== null),
      forward,
      observer,
      convPlanRuns: cuda.convPlanRuns,
    };
    this.checkEdges(node, this.recording);
  }

  /** A node of the recorded block sends gradients only within the block, to its parameters or to its input. */
  private checkEdges(node: Node, r: BackwardRun): void {
    for (const e of node.next) {
      if (!e) continue;
      const m = e.node;
      if (m.blockTag === r.tag || m === r.inputNode || (m.param !== null && r.params.includes(m.param))) continue;
      r.rec.failure ??= `a gradient leaves the block for ${m.name}`;
    }
  }

  private endBackward(next: Node, inputs: readonly (Tensor | null)[]): void {
    const r = this.recording!;
    this.recording = null;
    this.ended.add(r.tag);
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
    if (cuda.convPlanRuns !== r.convPlanRuns) rec.failure ??= 'convolutions in the block';
    // the backward frees every storage the forward left that the block holds, and none that only holders outside it do
    const fwd = r.forward;
    const freed = new Set(rec.ops.filter((op) => (op & 3) === kFree).map((op) => op >> 2));
    for (let k = 0; k < fwd.storages.length; k++) {
      if (fwd.recording.blockHeld[k] !== freed.has(k) && k !== fwd.recording.output) rec.failure ??= `a storage of the block's forward is freed where the replay would not free it (${fwd.storages[k]!.label})`;
    }
    const grads: number[] = [];
    r.params.forEach((p, j) => {
      if (!p || r.hadGrad[j] || p.grad === null) return;
      let views = 0;
      for (let impl: TensorImpl | null = p.grad.impl; impl; impl = impl.base, views++) if (impl.refs !== 1 || impl.storage !== p.grad.storage) rec.failure ??= 'a gradient with other references';
      const k = rec.indexOf(p.grad.storage);
      if (k < rec.forwardCount || p.grad.storage.refs !== views) rec.failure ??= `a gradient not made in the backward (${p.name}: ${p.grad.storage.label}, ${k}, ${p.grad.storage.refs} references, ${views} views)`;
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
    const recording: BackwardRecording = { ...recordingOf(rec), forwardCount: rec.forwardCount, renamed, grads, output, outputMemoryOrder: output >= 0 ? passed!.impl.memoryOrder : null };
    if (!this.backward) {
      this.backward = recording;
      return;
    }
    const t = this.backward;
    const from = this.reuse.name(this.last);
    const to = this.reuse.name(this.first);
    const sameRenames = t.renamed.size === renamed.size && [...t.renamed].every(([k, [label, c]]) => renamed.get(k)?.[1] === c && renamed.get(k)?.[0] === relabel(label, from, to));
    if (!sameRecording(t, recording) || !sameNames(namesFor(t, from, to), recording) || t.forwardCount !== recording.forwardCount || !equalArrays(t.grads, recording.grads) || t.output !== recording.output || !sameMemoryOrder(t.outputMemoryOrder, recording.outputMemoryOrder) || !sameRenames) {
      throw new BlocksNotReusable(`block ${this.first}'s backward differs from the replayed one`);
    }
    this.checked = true;
  }
}
