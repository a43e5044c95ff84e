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
import { numel, type Tensor } from '../tensor/tensor.ts';
import { ReadyQueue } from './ready-queue.ts';

/** The gradient of each forward output, in; the gradient of each forward input, out (null: none). */
export type BackwardFn = (grads: (Tensor | null)[]) => (Tensor | null)[];

export interface Node {
  readonly name: string;
  readonly seq: number;
  /** Per forward input: the node its gradient goes to, and which of that node's outputs it is. */
  readonly next: ({ node: Node; slot: number } | null)[];
  /** Shapes of the forward inputs (for sum_to). */
  readonly inputShapes: (readonly number[])[];
  /** Dtypes of the forward inputs (validate_outputs converts a gradient of another dtype). */
  readonly inputDTypes?: (DType | null)[];
  /** Number of forward outputs (size of the input buffer). */
  readonly numOutputs: number;
  apply: BackwardFn;
  /** `release_variables`: drop the saved tensors. */
  releaseVariables(): void;
  /** The running backward's bookkeeping (GraphTask's dependencies and InputBuffer): edges left, gradients so far. */
  deps: number;
  buffer: (Tensor | null)[] | null;
  /** Which backward last counted this node's dependencies. */
  epoch: number;
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
    const param = this;
    this.accumulateGrad = {
      name: `AccumulateGrad(${name})`,
      seq: Number.MAX_SAFE_INTEGER, // sequence_nr UINT64_MAX: runs as soon as it is ready
      next: [],
      inputShapes: [tensor.shape],
      numOutputs: 1,
      apply([grad]) {
        // The engine drops `grad` (its InputBuffer slot) after this returns.
        if (!grad) return [];
        if (param.grad === null) {
          // Stolen when nobody else holds it (use_count <= 1), else clone_obey_contract copies it.
          if (device.useCount(grad) <= 1) {
            param.grad = device.ref(grad);
            device.rename(grad.storage, `${name}.grad`, 'gradient');
          } else {
            param.grad = device.empty(param.tensor.shape, param.tensor.dtype, `${name}.grad`, 'gradient');
          }
        }
        // else: variable_grad += new_grad, in place
        return [];
      },
      releaseVariables() {},
      deps: 0,
      buffer: null,
      epoch: 0,
    };
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

export class Autograd {
  private sequenceNr = 0;
  /** The checkpointed region whose forward is running, or null. */
  frame: CheckpointFrame | null = null;
  /** The checkpointed region being recomputed in backward, or null. */
  private recomputing: CheckpointFrame | null = null;
  /** `torch.no_grad()`: nothing is recorded. */
  gradMode = true;
  private readonly device: CudaDevice;

  constructor(device: CudaDevice) {
    this.device = device;
  }

  /** Does any input need a gradient (so that the op records a node)? */
  needsGrad(inputs: readonly (Tensor | null)[]): boolean {
    if (!this.gradMode) return false;
    return inputs.some((t) => t !== null && (t.gradFn !== null || t.requiresGrad));
  }

  /**
   * Saves an op's inputs for its backward. VariableType saves inputs before the kernel runs (outputs after), so
   * ops call this before allocating their outputs: when the recomputation of a checkpointed region stops at the
   * last saved tensor and that is an input, the op's outputs are never made. Returns the references the op hands
   * to `record` (none while recomputing: the frame keeps them).
   */
  saveInputs(needsGrad: boolean, tensors: readonly Tensor[]): Tensor[] {
    if (!needsGrad || !this.gradMode) return [];
    const device = this.device;
    const recomputing = this.recomputing;
    if (!recomputing) return tensors.map((t) => device.ref(t));
    for (const t of tensors) recomputing.stored[recomputing.packed++] = device.escape(device.ref(t));
    if (recomputing.packed >= recomputing.holders) throw new StopRecomputation();
    return [];
  }

  /** The edge an input's gradient flows along. */
  private edge(t: Tensor | null): { node: Node; slot: number } | null {
    if (!t) return null;
    if (t.gradFn) return { node: t.gradFn, slot: t.outputSlot };
    if (t.requiresGrad && t.leaf) return { node: t.leaf.accumulateGrad, slot: 0 };
    return null;
  }

  /**
   * Records an op: `saved` are references the node keeps until its backward ran; outputs get it as grad_fn.
   * Returns false (and records nothing) when no input needs a gradient: the caller then releases `saved`.
   */
  record(name: string, inputs: readonly (Tensor | null)[], outputs: readonly Tensor[], saved: readonly Tensor[], apply: BackwardFn): boolean {
    if (!this.needsGrad(inputs)) {
      for (const t of saved) this.device.release(t);
      return false;
    }
    const device = this.device;
    const recomputing = this.recomputing;
    if (recomputing) {
      // The pack hook of the recomputation stores each saved tensor for the node of the original forward.
      for (const t of saved) recomputing.stored[recomputing.packed++] = device.escape(t);
      for (const t of outputs) t.requiresGrad = true;
      if (recomputing.packed >= recomputing.holders) throw new StopRecomputation();
      return true;
    }
    const frame = this.frame;
    if (frame) return this.recordInFrame(frame, name, inputs, outputs, saved, apply);
    let released = false;
    this.attach(name, inputs, outputs, apply, () => {
      if (released) return;
      released = true;
      for (const t of saved) device.release(t);
    });
    return true;
  }

  /** Makes the node and sets it as grad_fn of the outputs. */
  private attach(name: string, inputs: readonly (Tensor | null)[], outputs: readonly Tensor[], apply: BackwardFn, releaseVariables: () => void): void {
    const node: Node = {
      name,
      seq: this.sequenceNr++,
      next: inputs.map((t) => this.edge(t)),
      inputShapes: inputs.map((t) => (t ? t.shape : [])),
      inputDTypes: inputs.map((t) => (t ? t.dtype : null)),
      numOutputs: outputs.length,
      apply,
      releaseVariables,
      deps: 0,
      buffer: null,
      epoch: 0,
    };
    outputs.forEach((t, i) => {
      t.gradFn = node;
      t.outputSlot = i;
    });
  }

  private recordInFrame(
    frame: CheckpointFrame,
    name: string,
    inputs: readonly (Tensor | null)[],
    outputs: readonly Tensor[],
    saved: readonly Tensor[],
    apply: BackwardFn,
  ): boolean {
    const device = this.device;
    const start = frame.holders;
    const count = saved.length;
    frame.holders += count;
    for (const t of saved) device.release(t); // the pack hook keeps a holder, not the tensor
    if (count > 0) frame.liveHolderNodes++;
    let released = false;
    this.attach(
      name,
      inputs,
      outputs,
      (grads) => {
        if (count > 0 && !frame.recomputed) this.recompute(frame);
        const result = apply(grads);
        // unpack_hook hands the recomputed tensors over (the frame drops its handle): they die with apply's
        // locals, before the engine's validate_outputs (measured on the H100).
        for (let i = start; i < start + count; i++) {
          device.release(frame.stored[i]);
          frame.stored[i] = null;
        }
        return result;
      },
      () => {
        if (released || count === 0) return;
        released = true;
        if (--frame.liveHolderNodes === 0) frame.die(device); // the input saver goes with the frame
      },
    );
    return true;
  }

  /** Re-runs a checkpointed region to recompute its saved tensors (`unpack_hook` -> `recompute_fn`). */
  private recompute(frame: CheckpointFrame): void {
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
   * forward ran in).
   */
  checkpointReentrant(x: Tensor, run: (x: Tensor) => Tensor, rerun: (body: () => Tensor) => Tensor): Tensor {
    const device = this.device;
    const previousGradMode = this.gradMode;
    this.gradMode = false;
    let out: Tensor;
    try {
      out = run(x);
    } finally {
      this.gradMode = previousGradMode;
    }
    const saved = this.needsGrad([x]) ? [device.ref(x)] : [];
    const input = saved[0];
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
   * its own, which changes the order the engine runs things in.
   */
  view(name: string, t: Tensor, shape: readonly number[] = t.shape): Tensor {
    const out = this.device.view(t, shape);
    const device = this.device;
    this.record(name, [t], [out], [], ([grad]) => [grad ? device.view(grad, t.shape) : null]);
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
    const startBuffer = new Array<Tensor | null>(start.numOutputs).fill(null);
    startBuffer[root.outputSlot] = device.ref(rootGrad);
    start.buffer = startBuffer;
    ready.push(start);

    const previousThread = device.thread;
    device.thread = 'autograd';
    while (ready.size) {
      const node = ready.pop()!;
      const inputs = node.buffer ?? new Array<Tensor | null>(node.numOutputs).fill(null);
      node.buffer = null;
      const outputs = node.apply(inputs);
      // validate_outputs: a gradient of another shape than its input (a broadcast bias) is summed to it, then
      // one of another dtype (an input of a mixed-dtype op) is converted to the input's dtype.
      for (let i = 0; i < outputs.length; i++) {
        const g = outputs[i];
        if (!g || !node.next[i]) continue;
        const shape = node.inputShapes[i];
        if (shape && numel(g.shape) !== numel(shape)) {
          const reduced = device.sumTo(g, shape, `sum_to in ${node.name}`);
          device.release(g);
          outputs[i] = reduced;
        }
        const dtype = node.inputDTypes?.[i];
        const h = outputs[i]!;
        if (dtype && h.dtype !== dtype) {
          const converted = device.empty(h.shape, dtype, `gradient to ${dtype} in ${node.name}`);
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
          if (!next.buffer) next.buffer = new Array<Tensor | null>(next.numOutputs).fill(null);
          next.buffer[e.slot] = this.accumulate(next.buffer[e.slot] ?? null, g);
        }
        if (--next.deps === 0) ready.push(next);
      }
    }
    device.thread = previousThread;
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
    // old + new (adding into the incoming gradient instead is only done for sparse buffers)
    const sum = device.empty(old.shape, old.dtype, 'gradient sum');
    device.release(old);
    device.release(incoming);
    return sum;
  }
}
