/**
 * Note [Replayed second step]: the forward and backward of the step before the recorded one (Note [Replayed steps]:
 * step 1, unless GradScaler skips steps), replayed as the recorded step's.
 *
 * Note [Replayed steps] replays the steps after the second repeatable one from its recording, but the first two
 * ran the model's code, which costs several times what the allocator does. The second one's forward and backward
 * are the first one's program again: the model, the ops and autograd send the allocator the same requests in the
 * same order, with two exceptions. (1) What the first one made for the rest of the process, on first use: the
 * cuBLAS and cuBLASLt workspaces of each thread (`CudaDevice.processStorages`), GradScaler's `_scale` and
 * `_growth_tracker`. (2) What the step's code frees of the step before: the inputs and the loss rebound in its first
 * micro-step, and the graph that loss held (`model.releaseGraph`); the recording marks those places (`cuts`). So the
 * step before the recorded one is recorded up to the end of its backward, and the next step's forward and backward replay
 * it (RequestTape.replayAsRecorded) without (1), running the step's own code at (2) on the previous step's tensors;
 * its optimizer step and zero_grad then run as code, on the gradients the replay made (given back to their
 * parameters, through as many views as they had: AccumulateGrad may steal a transposed matmul result). The replay
 * is heard as the full step would be (labels and renames, phases, unwinding frames), so that step is recorded as
 * before and replays the later ones: the model's code runs for one step instead of two.
 *
 * Checked when the step is recorded, else the next one runs in full: no convolution ran (cuDNN's plan fallback asks
 * the allocator: Note [Replayed steps]); the step freed nothing of an earlier step outside the cuts; no storage was
 * renamed twice; each gradient the optimizer reads is held by its parameter alone and was made in the step. Checked
 * while replaying: the code at the cuts frees all the step left but (1), as the full step's code did (a model that
 * kept a tensor from one step to the next would not); else the plan is simulated again without replay
 * (NotReplayable). An out-of-memory error in the replay stands for the full step's where no frame that frees memory
 * on unwinding was open, as in Note [Replayed steps]; where one was, `simulate` runs the plan again in full.
 * test/engine/train/step-replay.test.ts compares the results with full simulations on every calibration and
 * boundary-suite plan, peak details or not: 322 second steps replayed, 160 of them out of memory.
 */
import type { Parameter } from '../autograd/engine.ts';
import type { CudaDevice } from '../tensor/cuda.ts';
import type { DType } from '../tensor/dtype.ts';
import { Tensor, TensorImpl, type Storage } from '../tensor/tensor.ts';
import { RequestTape, type StepRecorder } from './step-replay.ts';

/** The replayed step would not be the full one (a tensor kept across steps): simulate the plan without replay. */
export class NotReplayable extends Error {
  constructor() {
    super('the step before left a tensor its code does not free: not replayed');
    this.name = 'NotReplayable';
  }
}

/**
 * A parameter's gradient at the end of the recorded backward: storage k of the recording, seen through `views`
 * TensorImpls (a view keeps its base: AccumulateGrad may steal a transposed matmul result).
 */
interface Gradient {
  param: Parameter;
  k: number;
  views: number;
  shape: readonly number[];
  dtype: DType;
}

/** What the replay calls back: the step's own code at cut j, and mark j (after forward, after backward, ...). */
export interface SecondStepHooks {
  atCut(j: number): void;
  marked(j: number): void;
}

/** A step's forward and backward as recorded, to replay as the next step's (this Note). */
export class SecondStepProgram {
  private readonly tape: RequestTape;
  /** The recorded step's storages, in order (storage k has serial firstSerial + k). */
  private readonly storages: readonly Storage[];
  private readonly firstSerial: number;
  /** [start, end) of the requests at each cut (the code at the cut frees the step before's tensors there). */
  private readonly cuts: readonly number[];
  private readonly gradients: readonly Gradient[];

  private constructor(r: StepRecorder, gradients: Gradient[]) {
    this.tape = new RequestTape(r);
    this.storages = r.storages;
    this.firstSerial = r.storages[0]?.serial ?? 0;
    this.cuts = r.cuts;
    this.gradients = gradients;
  }

  /** The last replay ran out of memory where the full step would stop with the same state. */
  get oomAsFull(): boolean {
    return this.tape.oomAsFull;
  }

  /**
   * The step recorded from its start to the end of its backward (`r`; its parameters' gradients now), as the next
   * step's forward and backward, or null when that would not be exact (the checks of the Note).
   */
  static prepare(r: StepRecorder, params: readonly Parameter[], microSteps: number, convPlans: number): SecondStepProgram | null {
    if (convPlans > 0 || r.renamesUntracked || r.marks.length !== 2 * microSteps || r.cuts.length !== 4) return null;
    const cuts = r.cuts;
    const inCut = (i: number) => (i >= cuts[0]! && i < cuts[1]!) || (i >= cuts[2]! && i < cuts[3]!);
    const insideCut = (i: number) => (i > cuts[0]! && i < cuts[1]!) || (i > cuts[2]! && i < cuts[3]!);
    for (let i = 0; i < r.requests.length; i++) if (r.requests[i]! < 0 !== inCut(i)) return null;
    for (const change of r.unwindingChanges) if (insideCut(change)) return null;
    for (const rename of r.renames.values()) if (insideCut(rename.at)) return null;
    for (const m of r.marks) if (insideCut(m)) return null;
    const gradients: Gradient[] = [];
    for (const param of params) {
      const g = param.grad;
      if (g === null) continue;
      // held by the parameter alone: each TensorImpl from the gradient down its bases once, and nothing else
      let views = 0;
      for (let impl: TensorImpl | null = g.impl; impl; impl = impl.base, views++) if (impl.refs !== 1 || impl.storage !== g.storage) return null;
      const k = r.indexOf(g.storage);
      if (k < 0 || g.released || g.storage.refs !== views) return null;
      gradients.push({ param, k, views, shape: g.shape, dtype: g.dtype });
    }
    return new SecondStepProgram(r, gradients);
  }

  private indexOf(s: Storage): number {
    const k = s.serial - this.firstSerial;
    return k >= 0 && k < this.storages.length && this.storages[k] === s ? k : -1;
  }

  /**
   * The next step's forward and backward, after the recorded step's optimizer step and zero_grad: `processStorages`
   * (made by the recorded step for the process) are not made again; the hooks run the step's code at the cuts and
   * read the marks. Leaves each parameter its gradient. Throws the allocator's OutOfMemoryError as the full step
   * would have (`oomAsFull`), NotReplayable when the step's code left something of the recorded step alive.
   */
  replay(cuda: CudaDevice, processStorages: readonly Storage[], hooks: SecondStepHooks): void {
    const skip = new Uint8Array(this.storages.length);
    for (const s of processStorages) {
      const k = this.indexOf(s);
      if (k >= 0) skip[k] = 1;
    }
    const left: Storage[] = [];
    this.storages.forEach((s, k) => {
      if (s.block !== null && !skip[k]) left.push(s);
    });
    const current: Storage[] = new Array(this.storages.length);
    const atCut = (j: number) => {
      hooks.atCut(j);
      if (j === 1 && left.some((s) => s.block !== null)) throw new NotReplayable();
    };
    this.tape.replayAsRecorded(cuda, current, skip, this.cuts, atCut, hooks.marked);
    for (const { param, k, views, shape, dtype } of this.gradients) {
      let impl = new TensorImpl(current[k]!, null);
      for (let v = 1; v < views; v++) impl = new TensorImpl(current[k]!, impl);
      param.grad = new Tensor(shape, dtype, impl);
    }
  }
}
