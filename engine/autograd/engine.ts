/**
 * Autograd as `torch/csrc/autograd/engine.cpp` runs it, for memory:
 * - forward records one Node per differentiable op, holding references to the tensors its backward formula needs
 *   (`derivatives.yaml`);
 * - backward runs ready nodes latest-first (descending sequence_nr; AccumulateGrad first of all), on autograd's
 *   own device thread;
 * - a node's incoming gradients die when it returns, then its saved tensors are released (`release_variables`);
 * - gradients flowing into one node add up in its InputBuffer, in place when the buffer holds the only reference;
 * - a gradient whose shape differs from its input's is reduced with `sum_to` (validate_outputs);
 * - AccumulateGrad steals a gradient nobody else holds, and adds in place into an existing `.grad`.
 */
import type { CudaDevice } from '../tensor/cuda.ts';
import type { DType } from '../tensor/dtype.ts';
import { numel, obeysLayoutContract, reshapedMemoryOrder, swappedMemoryOrder, type Tensor } from '../tensor/tensor.ts';
import { ReadyQueue } from './ready-queue.ts';

/** The gradient of each forward output, in; the gradient of each forward input, out (null: none). */
export type BackwardFn = (grads: (Tensor | null)[]) => (Tensor | null)[];

/**
 * `torch::autograd::Edge`: the node a gradient flows to and which of that node's inputs (one of its forward
 * outputs) it is, with that tensor's shape and dtype, which PyTorch keeps as the node's `input_metadata`:
 * validate_outputs sums and converts a gradient to them. Edges never change, so the consumers of one output share
 * one (`Node.edgeTo`).
 */
export interface Edge {
  readonly node: Node;
  readonly slot: number;
  readonly shape: readonly number[];
  readonly dtype: DType;
}

const NO_TENSORS: readonly Tensor[] = [];

/**
 * `torch::autograd::Node`. Written as classes (a node per op, its saved tensors a field) rather than closures:
 * a 70B step records some 10^5 nodes, and each closure and array less is less for the garbage collector.
 */
export abstract class Node {
  readonly seq: number;
  /** Per forward input: the edge its gradient goes along (null: none). */
  readonly next: readonly (Edge | null)[];
  /** Number of forward outputs (size of the input buffer). */
  readonly numOutputs: number;
  /** The running backward's bookkeeping (GraphTask's dependencies and InputBuffer): edges left, gradients so far. */
  deps = 0;
  buffer: (Tensor | null)[] | null = null;
  /** Which backward last counted this node's dependencies. */
  epoch = 0;
  /** The edge into output 0 (most nodes have one output), made on first use. */
  private firstEdge: Edge | null = null;
  /** The recorded block whose forward made this node (`Autograd.blockTag`; 0: none): Note [Reused blocks]. */
  blockTag = 0;

  constructor(seq: number, next: readonly (Edge | null)[], numOutputs: number) {
    this.seq = seq;
    this.next = next;
    this.numOutputs = numOutputs;
  }

  abstract readonly name: string;
  /** The backward formula: gradients of the forward outputs in, of the forward inputs out. */
  abstract apply(grads: (Tensor | null)[]): (Tensor | null)[];
  /** `release_variables`: drop the saved tensors. */
  abstract releaseVariables(): void;

  /** The parameter whose gradient this node accumulates (AccumulateGrad), else null. */
  get param(): Parameter | null {
    return null;
  }

  /** The edge into this node's output `slot`, which `t` is (a reference to). */
  edgeTo(slot: number, t: Tensor): Edge {
    if (slot !== 0) return { node: this, slot, shape: t.shape, dtype: t.dtype };
    return (this.firstEdge ??= { node: this, slot: 0, shape: t.shape, dtype: t.dtype });
  }
}

/** A differentiable op's node: its backward formula and the tensors it saved. */
class FunctionNode extends Node {
  readonly name: string;
  private readonly fn: BackwardFn;
  private saved: readonly Tensor[];
  private readonly device: CudaDevice;

  constructor(name: string, seq: number, next: (Edge | null)[], numOutputs: number, fn: BackwardFn, saved: readonly Tensor[], device: CudaDevice) {
    super(seq, next, numOutputs);
    this.name = name;
    this.fn = fn;
    this.saved = saved;
    this.device = device;
  }

  apply(grads: (Tensor | null)[]): (Tensor | null)[] {
    return this.fn(grads);
  }

  releaseVariables(): void {
    const saved = this.saved;
    this.saved = NO_TENSORS;
    for (let i = 0; i < saved.length; i++) this.device.release(saved[i]);
  }
}

/**
 * A node recorded inside a checkpointed region: its saved tensors are holders `start..start+count` of the frame;
 * its first backward recomputes the region, and it frees the recomputed tensors after its own backward.
 */
class CheckpointedNode extends Node {
  readonly name: string;
  private readonly fn: BackwardFn;
  private readonly autograd: Autograd;
  private readonly frame: CheckpointFrame;
  private readonly start: number;
  private readonly count: number;
  private released = false;

  constructor(name: string, seq: number, next: (Edge | null)[], numOutputs: number, fn: BackwardFn, autograd: Autograd, frame: CheckpointFrame, start: number, count: number) {
    super(seq, next, numOutputs);
    this.name = name;
    this.fn = fn;
    this.autograd = autograd;
    this.frame = frame;
    this.start = start;
    this.count = count;
  }

  apply(grads: (Tensor | null)[]): (Tensor | null)[] {
    const { frame, start, count } = this;
    const device = this.autograd.device;
    if (count > 0 && !frame.recomputed) this.autograd.recompute(frame);
    const result = this.fn(grads);
    // unpack_hook hands the recomputed tensors over (the frame drops its handle): they die with apply's
    // locals, before the engine's validate_outputs (measured on the H100).
    for (let i = start; i < start + count; i++) {
      device.release(frame.stored[i]);
      frame.stored[i] = null;
    }
    return result;
  }

  releaseVariables(): void {
    if (this.released || this.count === 0) return;
    this.released = true;
    if (--this.frame.liveHolderNodes === 0) this.frame.die(this.autograd.device); // the input saver goes with the frame
  }
}

/** A view's node (`ViewBackward0`, `TBackward0`, ...): the gradient reshaped to the input's shape, a view of it. */
class ViewBackward extends Node {
  readonly name: string;
  private readonly inputShape: readonly number[];
  private readonly device: CudaDevice;
  /** A transpose's two dimensions (its backward transposes the gradient back), or null for a reshape. */
  private readonly swapped: readonly [number, number] | null;
  /** What a reshape's copy is called (a gradient whose memory order no view of the input's shape has). */
  private readonly copyLabel: string | undefined;

  constructor(name: string, seq: number, next: (Edge | null)[], inputShape: readonly number[], device: CudaDevice, swapped: readonly [number, number] | null = null, copyLabel?: string) {
    super(seq, next, 1);
    this.name = name;
    this.inputShape = inputShape;
    this.device = device;
    this.swapped = swapped;
    this.copyLabel = copyLabel;
  }

  /**
   * A transpose's backward transposes the gradient back (a view). A reshape's is `grad.reshape(input_sizes)`: a
   * view, unless the gradient arrived in a memory order no view of the input's shape has (a ViT's residual-stream
   * gradient, [L, B, E] in memory, folded for a linear's mm): then a contiguous copy.
   */
  apply([grad]: (Tensor | null)[]): (Tensor | null)[] {
    if (!grad) return [null];
    // a transpose or permute recorded by its shape alone: its backward is a view whose order is not tracked
    if (!this.swapped && !RESHAPES.has(this.name)) return [this.device.view(grad, this.inputShape)];
    const order = this.swapped ? swappedMemoryOrder(grad, ...this.swapped) : reshapedMemoryOrder(grad.shape, grad.impl.memoryOrder, this.inputShape);
    if (order === undefined) return [this.device.empty(this.inputShape, grad.dtype, this.copyLabel ?? `gradient reshaped in ${this.name} (contiguous copy)`)];
    const view = this.device.view(grad, this.inputShape);
    view.impl.memoryOrder = order;
    return [view];
  }

  releaseVariables(): void {}
}

/**
 * View nodes whose backward gives the gradient the input's shape (derivatives.yaml): `grad.reshape(self.sym_sizes())`
 * for view and _unsafe_view, a copy where no view has that shape; squeeze, unsqueeze and alias only add or drop
 * dimensions of one element, always a view.
 */
const RESHAPES = new Set(['ViewBackward0', 'UnsafeViewBackward0', 'UnsqueezeBackward0', 'SqueezeBackward0', 'AliasBackward0']);

/** `AccumulateGrad`: a leaf's node, which makes or adds into its `.grad`. */
class AccumulateGrad extends Node {
  private readonly leaf: Parameter;
  private readonly device: CudaDevice;

  constructor(param: Parameter, device: CudaDevice) {
    // sequence_nr UINT64_MAX: runs as soon as it is ready
    super(Number.MAX_SAFE_INTEGER, [], 1);
    this.leaf = param;
    this.device = device;
  }

  get name(): string {
    return `AccumulateGrad(${this.leaf.name})`;
  }

  override get param(): Parameter {
    return this.leaf;
  }

  apply([grad]: (Tensor | null)[]): (Tensor | null)[] {
    // The engine drops `grad` (its InputBuffer slot) after this returns.
    if (!grad) return [];
    const param = this.leaf;
    const device = this.device;
    if (param.grad === null) {
      // Stolen when nobody else holds it (use_count <= 1) and it is laid out as the variable is, else
      // clone_obey_contract copies it into the variable's layout (a reentrant checkpoint's detached input whose
      // gradient arrives in another memory order: measured on the H100, torchvision's ViT).
      if (device.useCount(grad) <= 1 && obeysLayoutContract(grad, param.tensor)) {
        param.grad = device.ref(grad);
        device.rename(grad.storage, `${param.name}.grad`, 'gradient');
      } else {
        param.grad = device.empty(param.tensor.shape, param.tensor.dtype, `${param.name}.grad`, 'gradient');
        param.grad.impl.memoryOrder = param.tensor.impl.memoryOrder;
      }
    }
    // else: variable_grad += new_grad, in place
    return [];
  }

  releaseVariables(): void {}
}

export class Parameter {
  readonly name: string;
  tensor: Tensor;
  grad: Tensor | null = null;
  readonly accumulateGrad: Node;

  constructor(name: string, tensor: Tensor, device: CudaDevice) {
    this.name = name;
    this.tensor = tensor;
    tensor.requiresGrad = true;
    tensor.leaf = this;
    this.accumulateGrad = new AccumulateGrad(this, device);
  }
}

/**
 * Thrown by the recomputation of a checkpointed region once it has recomputed every saved tensor (PyTorch's
 * `_StopRecomputationError`). Not an Error: it is control flow, thrown once per region, and capturing a stack
 * trace each time cost a tenth of a 70B search.
 */
export class StopRecomputation {}

/**
 * A region run under `torch.utils.checkpoint.checkpoint(fn, x, use_reentrant=False)`
 * (`_checkpoint_without_reentrant_generator`): its nodes keep only holders for their saved tensors; the first
 * node that unpacks one re-runs fn (early stop: right after the last saved tensor is packed again), and each
 * node frees its recomputed tensors after its own backward. The input stays saved until the frame dies.
 */
export class CheckpointFrame {
  /** Saved tensors packed in the original forward (holders). */
  holders = 0;
  /** Recomputed saved tensors, by holder index. */
  readonly stored: (Tensor | null)[] = [];
  packed = 0;
  recomputed = false;
  /** Nodes with holders whose variables have not been released yet; the frame dies with the last. */
  liveHolderNodes = 0;
  input: Tensor | null;
  readonly run: (x: Tensor) => Tensor;
  /** Wraps the recomputation (to reopen the autocast region the forward ran in). */
  readonly rerun: (body: () => Tensor) => Tensor;

  /** Other tensors the recomputation needs (the region's arguments and keyword arguments): they die with it. */
  closure: Tensor[];

  constructor(input: Tensor, run: (x: Tensor) => Tensor, rerun: (body: () => Tensor) => Tensor, closure: Tensor[]) {
    this.input = input;
    this.run = run;
    this.rerun = rerun;
    this.closure = closure;
  }

  /** The frame dies (its last saved-tensor holder went, or it never packed any): its references go. */
  die(device: CudaDevice): void {
    device.release(this.input);
    this.input = null;
    for (const t of this.closure) device.release(t);
    this.closure = [];
  }
}

/** Numbers the backward passes (nested ones included), to reset each node's bookkeeping once per pass. */
let backwardEpoch = 0;

/**
 * A node's InputBuffer: one slot per output of the node, empty. Filled by `push`, not `new Array(n).fill(null)`,
 * which optimized code met with another map than it was compiled for on every backward call and deoptimized
 * (node --trace-deopt: `backward` 26 times in a Llama 2 70B search).
 */
function inputBuffer(slots: number): (Tensor | null)[] {
  const buffer: (Tensor | null)[] = [];
  for (let i = 0; i < slots; i++) buffer.push(null);
  return buffer;
}

export class Autograd {
  private sequenceNr = 0;
  /** The checkpointed region whose forward is running, or null. */
  frame: CheckpointFrame | null = null;
  /** The checkpointed region being recomputed in backward, or null. */
  private recomputing: CheckpointFrame | null = null;
  /** `torch.no_grad()`: nothing is recorded. */
  gradMode = true;
  /**
   * Reentrant checkpointed blocks run with gradients on whose input needed none (a frozen embedding, no
   * `enable_input_require_grads`): PyTorch warns "None of the inputs have requires_grad=True. Gradients will be
   * None" and records nothing for them, so no parameter inside gets a gradient.
   */
  reentrantBlocksWithoutGrad = 0;
  readonly device: CudaDevice;
  /** The recorded block whose forward runs now (Note [Reused blocks], models/block-reuse.ts; 0: none): its nodes carry it. */
  blockTag = 0;
  /** Hears each node the engine is about to apply, and the end of each outermost backward (Note [Reused blocks]). */
  listener: { applying(node: Node, inputs: (Tensor | null)[], depth: number): void; finished(): void } | null = null;
  /** Backward passes running now (a reentrant checkpoint's runs inside its node's). */
  private backwardDepth = 0;

  constructor(device: CudaDevice) {
    this.device = device;
  }

  /** Does any input need a gradient (so that the op records a node)? */
  needsGrad(inputs: readonly (Tensor | null)[]): boolean {
    if (!this.gradMode) return false;
    for (let i = 0; i < inputs.length; i++) {
      const t = inputs[i];
      if (t && (t.gradFn !== null || t.requiresGrad)) return true;
    }
    return false;
  }

  /** The recomputation's pack hook: each saved tensor stored for the node of the original forward. */
  private pack(recomputing: CheckpointFrame, outputs: readonly Tensor[], saved: readonly Tensor[]): void {
    for (let i = 0; i < saved.length; i++) recomputing.stored[recomputing.packed++] = this.device.escape(saved[i]!);
    for (let i = 0; i < outputs.length; i++) outputs[i]!.requiresGrad = true;
    if (recomputing.packed >= recomputing.holders) throw new StopRecomputation();
  }

  /**
   * Saves an op's inputs for its backward. VariableType saves inputs before the kernel runs (outputs after), so
   * ops call this before allocating their outputs: when the recomputation of a checkpointed region stops at the
   * last saved tensor and that is an input, the op's outputs are never made. Returns the references the op hands
   * to `record` (none while recomputing: the frame keeps them).
   */
  saveInputs(needsGrad: boolean, tensors: readonly Tensor[]): readonly Tensor[] {
    if (!needsGrad || !this.gradMode) return NO_TENSORS;
    const device = this.device;
    const recomputing = this.recomputing;
    if (!recomputing) {
      const saved = new Array<Tensor>(tensors.length); // a hot path: a loop, not map
      for (let i = 0; i < tensors.length; i++) saved[i] = device.ref(tensors[i]!);
      return saved;
    }
    for (const t of tensors) recomputing.stored[recomputing.packed++] = device.escape(device.ref(t));
    if (recomputing.packed >= recomputing.holders) throw new StopRecomputation();
    return NO_TENSORS;
  }

  /** A sequence number for a node made outside `record` (Note [Reused blocks]: a replayed block's node). */
  nextSequenceNr(): number {
    return this.sequenceNr++;
  }

  /** The sequence number the next node gets (taking none). */
  peekSequenceNr(): number {
    return this.sequenceNr;
  }

  /** While a checkpointed region is recomputed: how many saved tensors it has packed so far (else null). */
  recomputedCount(): number | null {
    return this.recomputing ? this.recomputing.packed : null;
  }

  /**
   * The saved tensors a recomputation packed from `from` to `to` whose nodes died in the original forward (their
   * holders are gone): the recomputed graph held them, and they die with it (PyTorch stores nothing for a dead
   * holder; the recomputed node keeps what its pack hook returned).
   */
  dropRecomputed(from: number, to: number): void {
    const frame = this.recomputing;
    if (!frame) return;
    for (let i = from; i < to; i++) {
      this.device.release(frame.stored[i]);
      frame.stored[i] = null;
    }
  }

  /** The edge an input's gradient flows along. */
  edge(t: Tensor | null): Edge | null {
    if (!t) return null;
    if (t.gradFn) return t.gradFn.edgeTo(t.outputSlot, t);
    if (t.requiresGrad && t.leaf) return t.leaf.accumulateGrad.edgeTo(0, t);
    return null;
  }

  /**
   * Records an op: `saved` are references the node keeps until its backward ran; outputs get it as grad_fn.
   * Returns false (and records nothing) when no input needs a gradient: the caller then releases `saved`.
   */
  record(name: string, inputs: readonly (Tensor | null)[], outputs: readonly Tensor[], saved: readonly Tensor[], apply: BackwardFn): boolean {
    const device = this.device;
    if (!this.needsGrad(inputs)) {
      for (let i = 0; i < saved.length; i++) device.release(saved[i]);
      return false;
    }
    if (this.recomputing) {
      this.pack(this.recomputing, outputs, saved);
      return true;
    }
    const n = inputs.length;
    const next = new Array<Edge | null>(n); // a hot path: a loop, not map
    for (let i = 0; i < n; i++) next[i] = this.edge(inputs[i] ?? null);
    const seq = this.sequenceNr++;
    const frame = this.frame;
    let node: Node;
    if (frame) {
      const start = frame.holders;
      const count = saved.length;
      frame.holders += count;
      for (let i = 0; i < count; i++) device.release(saved[i]); // the pack hook keeps a holder, not the tensor
      if (count > 0) frame.liveHolderNodes++;
      node = new CheckpointedNode(name, seq, next, outputs.length, apply, this, frame, start, count);
    } else {
      node = new FunctionNode(name, seq, next, outputs.length, apply, saved, device);
    }
    node.blockTag = this.blockTag;
    for (let i = 0; i < outputs.length; i++) {
      const t = outputs[i]!;
      t.gradFn = node;
      t.outputSlot = i;
    }
    return true;
  }

  /** Re-runs a checkpointed region to recompute its saved tensors (`unpack_hook` -> `recompute_fn`). */
  recompute(frame: CheckpointFrame): void {
    const device = this.device;
    frame.recomputed = true;
    const previousGradMode = this.gradMode;
    this.gradMode = true;
    this.recomputing = frame;
    try {
      device.withScope(() => {
        const x = device.ref(frame.input!);
        x.gradFn = null; // the saved input comes back detached, requiring grad
        x.requiresGrad = true;
        const out = frame.rerun(() => frame.run(x));
        device.release(out);
        device.release(x);
      });
    } catch (error) {
      if (!(error instanceof StopRecomputation)) throw error;
    } finally {
      this.recomputing = null;
      this.gradMode = previousGradMode;
    }
  }

  /**
   * `checkpoint(fn, x, use_reentrant=False)`: runs fn(x) as a checkpointed region; returns its output. `rerun`
   * wraps the recomputation: `recompute_fn` reruns fn under the forward's autocast state, a region of its own.
   * `closure`: tensors fn's closure holds (e.g. a `partial`'s keyword arguments), alive as long as the frame
   * (measured on the H100: a checkpointed decoder layer's mask, cos and sin die with layer 0's frame).
   */
  checkpoint(x: Tensor, run: (x: Tensor) => Tensor, rerun: (body: () => Tensor) => Tensor = (body) => body(), closure: readonly Tensor[] = []): Tensor {
    const frame = new CheckpointFrame(this.device.ref(x), run, rerun, closure.map((t) => this.device.ref(t)));
    const outer = this.frame;
    this.frame = frame;
    try {
      return run(x);
    } finally {
      this.frame = outer;
      if (frame.holders === 0) frame.die(this.device);
    }
  }

  /**
   * `checkpoint(fn, x, use_reentrant=True)` (`CheckpointFunction`): fn runs under no_grad (nothing saved, every
   * intermediate freed at once) and the input is saved. In backward, fn runs again with grad on from a detached
   * copy of the input, then a nested `torch.autograd.backward` goes through that graph; the input's gradient is
   * what accumulated into the detached copy. `rerun` wraps the recomputation (to reopen the autocast region the
   * forward ran in). The block's other tensor positional arguments (`positional`: GPT-2's causal mask) are saved
   * with the input (`ctx.save_for_backward(*tensor_inputs)`), before it, and released with it as the node's
   * backward ends (measured: gpt2_small_amp_bf16_eager_reentrant_sgdm, the mask freed as the first block's
   * backward ends, just before the dropout output the first block was given); its keyword arguments are the
   * closure (ReentrantClosures, engine/models/checkpointing.ts).
   */
  checkpointReentrant(x: Tensor, run: (x: Tensor) => Tensor, rerun: (body: () => Tensor) => Tensor, positional: readonly Tensor[] = []): Tensor {
    const device = this.device;
    const previousGradMode = this.gradMode;
    this.gradMode = false;
    let out: Tensor;
    try {
      out = run(x);
    } finally {
      this.gradMode = previousGradMode;
    }
    const saved = this.needsGrad([x]) ? [...positional.map((t) => device.ref(t)), device.ref(x)] : [];
    if (previousGradMode && saved.length === 0) this.reentrantBlocksWithoutGrad++;
    const input = saved[saved.length - 1];
    this.record('CheckpointFunctionBackward', [x], [out], saved, ([grad]) => {
      if (!grad || !input) return [null];
      const detached = device.ref(input);
      detached.gradFn = null;
      const leaf = new Parameter('checkpoint input (detached)', detached, device);
      const gradMode = this.gradMode;
      this.gradMode = true;
      let recomputed: Tensor;
      try {
        recomputed = rerun(() => run(detached));
      } finally {
        this.gradMode = gradMode;
      }
      this.backward(recomputed, grad); // torch.autograd.backward(outputs, grad_tensors), reentrant on this thread
      device.release(recomputed);
      device.release(detached);
      const inputGrad = leaf.grad;
      leaf.grad = null;
      return [inputGrad];
    });
    return out;
  }

  /**
   * A view op whose backward only reshapes the gradient (`t()`, `view`, `transpose`): no memory, but a node of
   * its own, which changes the order the engine runs things in. Two in five nodes of a transformer are these:
   * `record` without its arrays and closure (a view saves nothing, so the node is the same inside a checkpointed
   * region).
   */
  view(name: string, t: Tensor, shape: readonly number[] = t.shape, copyLabel?: string): Tensor {
    return this.viewOf(name, t, shape, null, copyLabel);
  }

  /**
   * `t.transpose(i, j)`, a view laid out as t is (TensorImpl.memoryOrder), whose backward transposes the gradient
   * back, keeping its memory order: where the memory order decides what a later reshape copies.
   */
  transpose(t: Tensor, i: number, j: number, name = 'TransposeBackward0'): Tensor {
    const shape = [...t.shape];
    [shape[i], shape[j]] = [shape[j]!, shape[i]!];
    const out = this.viewOf(name, t, shape, [i, j]);
    out.impl.memoryOrder = swappedMemoryOrder(t, i, j);
    return out;
  }

  private viewOf(name: string, t: Tensor, shape: readonly number[], swapped: readonly [number, number] | null, copyLabel?: string): Tensor {
    const out = this.device.view(t, shape);
    if (!this.gradMode || (t.gradFn === null && !t.requiresGrad)) return out; // needsGrad([t])
    if (this.recomputing) {
      this.pack(this.recomputing, [out], NO_TENSORS);
      return out;
    }
    const node = new ViewBackward(name, this.sequenceNr++, [this.edge(t)], t.shape, this.device, swapped, copyLabel);
    node.blockTag = this.blockTag;
    out.gradFn = node;
    out.outputSlot = 0;
    return out;
  }

  /** `loss.backward()`: runs the graph from root with gradient rootGrad (the caller keeps rootGrad alive). */
  backward(root: Tensor, rootGrad: Tensor, retainGraph = false): void {
    const device = this.device;
    const start = root.gradFn;
    if (!start) throw new Error('backward of a tensor that does not require grad');
    // Dependencies: how many edges lead into each node (kept on the nodes while this backward runs).
    const epoch = ++backwardEpoch;
    const seen: Node[] = [start];
    start.epoch = epoch;
    start.deps = 0;
    start.buffer = null;
    for (let k = 0; k < seen.length; k++) {
      const edges = seen[k]!.next;
      for (let i = 0; i < edges.length; i++) {
        const e = edges[i];
        if (!e) continue;
        const m = e.node;
        if (m.epoch !== epoch) {
          m.epoch = epoch;
          m.deps = 0;
          m.buffer = null;
          seen.push(m);
        }
        m.deps++;
      }
    }
    const ready = new ReadyQueue<Node>();
    const startBuffer = inputBuffer(start.numOutputs);
    startBuffer[root.outputSlot] = device.ref(rootGrad);
    start.buffer = startBuffer;
    ready.push(start);

    const previousThread = device.thread;
    device.thread = 'autograd';
    const previousTag = this.blockTag;
    this.backwardDepth++;
    try {
      while (ready.size) {
        const node = ready.pop()!;
        const inputs = node.buffer ?? inputBuffer(node.numOutputs);
        node.buffer = null;
        this.listener?.applying(node, inputs, this.backwardDepth);
        // nodes a node's backward records (a reentrant checkpoint's recomputation) belong to its block
        this.blockTag = node.blockTag;
        const outputs = node.apply(inputs);
        // validate_outputs: a gradient of another shape than its input (a broadcast bias) is summed to it, then
        // one of another dtype (an input of a mixed-dtype op) is converted to the input's dtype.
        for (let i = 0; i < outputs.length; i++) {
          const g = outputs[i];
          const e = node.next[i];
          if (!g || !e) continue;
          // (most gradients are made with their input's own shape array: no need to count its elements)
          if (g.shape !== e.shape && numel(g.shape) !== numel(e.shape)) {
            const reduced = device.sumTo(g, e.shape, `sum_to in ${node.name}`);
            device.release(g);
            outputs[i] = reduced;
          }
          const dtype = e.dtype;
          const h = outputs[i]!;
          if (h.dtype !== dtype) {
            // grad.to(dtype) keeps a dense gradient's strides (MemoryFormat::Preserve)
            const converted = device.empty(h.shape, dtype, `gradient to ${dtype} in ${node.name}`);
            converted.impl.memoryOrder = h.impl.memoryOrder;
            device.release(h);
            outputs[i] = converted;
          }
        }
        for (let i = 0; i < inputs.length; i++) device.release(inputs[i]); // the InputBuffer dies when call_function returns
        if (!retainGraph) node.releaseVariables();
        for (let i = 0; i < outputs.length; i++) {
          const g = outputs[i] ?? null;
          const e = node.next[i];
          if (!e) {
            device.release(g);
            continue;
          }
          const next = e.node;
          if (g) {
            if (!next.buffer) next.buffer = inputBuffer(next.numOutputs);
            next.buffer[e.slot] = this.accumulate(next.buffer[e.slot] ?? null, g);
          }
          if (--next.deps === 0) ready.push(next);
        }
      }
    } finally {
      this.blockTag = previousTag;
      device.thread = previousThread;
      this.backwardDepth--;
    }
    if (this.backwardDepth === 0) this.listener?.finished();
  }

  /**
   * `InputBuffer::accumulate`: in place into a gradient nobody else holds (`can_accumulate_inplace`: one
   * reference and one user of its storage; a view's base counts, measured on the H100), else a new sum.
   */
  private accumulate(old: Tensor | null, incoming: Tensor): Tensor {
    const device = this.device;
    if (!old) return incoming;
    if (device.useCount(old) === 1 && device.storageUseCount(old) === 1) {
      device.release(incoming); // old.add_(incoming)
      return old;
    }
    // old + new (adding into the incoming gradient instead is only done for sparse buffers), laid out as old is:
    // TensorIterator orders the output's dimensions by its first operand's strides
    const sum = device.empty(old.shape, old.dtype, 'gradient sum');
    sum.impl.memoryOrder = old.impl.memoryOrder;
    device.release(old);
    device.release(incoming);
    return sum;
  }
}
