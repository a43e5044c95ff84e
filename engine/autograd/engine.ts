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
  /** Number of forward outputs (size of the input buffer). */
  readonly numOutputs: number;
  apply: BackwardFn;
  /** `release_variables`: drop the saved tensors. */
  releaseVariables(): void;
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
            grad.storage.category = 'gradient';
            grad.storage.label = `${name}.grad`;
          } else {
            param.grad = device.empty(param.tensor.shape, param.tensor.dtype, `${name}.grad`, 'gradient');
          }
        }
        // else: variable_grad += new_grad, in place
        return [];
      },
      releaseVariables() {},
    };
  }
}

export class Autograd {
  private sequenceNr = 0;
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
    let released = false;
    const node: Node = {
      name,
      seq: this.sequenceNr++,
      next: inputs.map((t) => this.edge(t)),
      inputShapes: inputs.map((t) => (t ? t.shape : [])),
      numOutputs: outputs.length,
      apply,
      releaseVariables() {
        if (released) return;
        released = true;
        for (const t of saved) device.release(t);
      },
    };
    outputs.forEach((t, i) => {
      t.gradFn = node;
      t.outputSlot = i;
    });
    return true;
  }

  /**
   * A view op whose backward only reshapes the gradient (`t()`, `view`, `transpose`): no memory, but a node of
   * its own, which changes the order the engine runs things in.
   */
  view(name: string, t: Tensor, shape: readonly number[] = t.shape): Tensor {
    const out = this.device.view(t, shape);
    const device = this.device;
    this.record(name, [t], [out], [], ([grad]) => [grad ? device.ref(grad) : null]);
    return out;
  }

  /** `loss.backward()`: runs the graph from root with gradient rootGrad (the caller keeps rootGrad alive). */
  backward(root: Tensor, rootGrad: Tensor, retainGraph = false): void {
    const device = this.device;
    const start = root.gradFn;
    if (!start) throw new Error('backward of a tensor that does not require grad');
    // Dependencies: how many edges lead into each node.
    const dependencies = new Map<Node, number>();
    const seen = new Set<Node>([start]);
    const stack = [start];
    while (stack.length) {
      const n = stack.pop()!;
      for (const e of n.next) {
        if (!e) continue;
        dependencies.set(e.node, (dependencies.get(e.node) ?? 0) + 1);
        if (!seen.has(e.node)) {
          seen.add(e.node);
          stack.push(e.node);
        }
      }
    }
    const buffers = new Map<Node, (Tensor | null)[]>();
    const ready = new ReadyQueue<Node>();
    const push = (n: Node) => ready.push(n);
    const startBuffer = new Array<Tensor | null>(start.numOutputs).fill(null);
    startBuffer[root.outputSlot] = device.ref(rootGrad);
    buffers.set(start, startBuffer);
    push(start);

    const previousThread = device.thread;
    device.thread = 'autograd';
    while (ready.size) {
      const node = ready.pop()!;
      const inputs = buffers.get(node) ?? new Array<Tensor | null>(node.numOutputs).fill(null);
      buffers.delete(node);
      const outputs = node.apply(inputs);
      // validate_outputs: a gradient of another shape than its input (a broadcast bias) is summed to it.
      for (let i = 0; i < outputs.length; i++) {
        const g = outputs[i];
        const shape = node.inputShapes[i];
        if (g && shape && node.next[i] && numel(g.shape) !== numel(shape)) {
          const reduced = device.sumTo(g, shape, `sum_to in ${node.name}`);
          device.release(g);
          outputs[i] = reduced;
        }
      }
      for (const g of inputs) device.release(g); // the InputBuffer dies when call_function returns
      if (!retainGraph) node.releaseVariables();
      for (let i = 0; i < outputs.length; i++) {
        const g = outputs[i] ?? null;
        const e = node.next[i];
        if (!e) {
          device.release(g);
          continue;
        }
        let buffer = buffers.get(e.node);
        if (!buffer) {
          buffer = new Array<Tensor | null>(e.node.numOutputs).fill(null);
          buffers.set(e.node, buffer);
        }
        if (g) buffer[e.slot] = this.accumulate(buffer[e.slot] ?? null, g);
        const left = dependencies.get(e.node)! - 1;
        dependencies.set(e.node, left);
        if (left === 0) push(e.node);
      }
    }
    device.thread = previousThread;
  }

  /** `InputBuffer::accumulate`: in place into a gradient nobody else holds, else a new sum. */
  private accumulate(old: Tensor | null, incoming: Tensor): Tensor {
    const device = this.device;
    if (!old) return incoming;
    if (device.useCount(old) === 1) {
      device.release(incoming); // old.add_(incoming)
      return old;
    }
    if (device.useCount(incoming) === 1) {
      device.release(old); // incoming.add_(old)
      return incoming;
    }
    const sum = device.empty(old.shape, old.dtype, 'gradient sum');
    device.release(old);
    device.release(incoming);
    return sum;
  }
}
