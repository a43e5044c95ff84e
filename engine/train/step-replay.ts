/**
 * Note [Replayed steps]: steps after the first repeatable one, run through the allocator alone.
 *
 * Every step after the first runs the same program (Note [Steady state], steady-state.ts): the same tensors in the
 * same order, so the same storages are allocated and freed in the same order, whatever the allocator does with
 * them. Which blocks they get, whether a segment is reserved, released and retried, is the allocator's business and
 * stays simulated: a replayed step sends the allocator exactly the requests the model, the ops and autograd would
 * have sent (`malloc(size)` and `free(block)` in order), without running that code again. What the simulated GPU
 * keeps per storage (events, the peak and what is live there, the timeline) is kept for the replayed storages too.
 *
 * The program's requests depend on the allocator's state in one place: cuDNN's plan fallback (ops/conv.ts), which
 * catches an out-of-memory error, empties the cache and asks for other workspaces. A model with convolutions is
 * therefore never replayed. An out-of-memory error in a replayed step ends the step as in the full simulation, but
 * the full one then unwinds Python frames (more frees), which a replay cannot know: `simulate` then runs the plan
 * again without replay (engine/train/simulate.ts).
 *
 * A step also frees what the previous step left (its inputs and loss, rebound; GradScaler's found_inf): the
 * recorded step frees storages of the step before it, and a replayed step frees the same storages of its own
 * previous step. They are matched by what they are (label, category and size) and, among equals, by the order
 * they were allocated in; every storage the recorded step leaves must be one the next step frees, and the other way
 * round, or nothing is replayed. test/engine/train/step-replay.test.ts compares replayed and full simulations,
 * every field of the result, on every calibration and boundary-suite plan.
 */
import type { CudaDevice, StorageObserver } from '../tensor/cuda.ts';
import type { MemoryCategory, Storage } from '../tensor/tensor.ts';

/** What a replayed step reads at the points the full step reads the allocator (the StepResult's fields). */
export interface StepMarks {
  after_forward_bytes: number[];
  after_backward_bytes: number[];
  after_optimizer_step_bytes: number;
  after_zero_grad_bytes: number;
}

/** Records one step's storage requests as the simulated GPU makes them. */
export class StepRecorder implements StorageObserver {
  private readonly cuda: CudaDevice;
  /** Storages allocated in the step, in order, with the allocator's label and the phase they came in. */
  readonly storages: Storage[] = [];
  readonly allocatorLabels: string[] = [];
  /** Per request: `2k` allocates storage k, `2k + 1` frees it, `-(j + 1)` frees the j-th storage of an earlier step. */
  readonly requests: number[] = [];
  readonly phases: string[] = [];
  /** Storages of earlier steps freed in this one, in order. */
  readonly carried: Storage[] = [];
  /** The number of requests made when each mark (forward, backward, ... zero_grad) was read. */
  readonly marks: number[] = [];
  private readonly index = new Map<Storage, number>();

  constructor(cuda: CudaDevice) {
    this.cuda = cuda;
  }

  allocated(storage: Storage, allocatorLabel: string): void {
    const k = this.storages.length;
    this.index.set(storage, k);
    this.storages.push(storage);
    this.allocatorLabels.push(allocatorLabel);
    this.requests.push(2 * k);
    this.phases.push(this.cuda.phase);
  }

  freed(storage: Storage): void {
    const k = this.index.get(storage);
    if (k !== undefined) this.requests.push(2 * k + 1);
    else {
      this.carried.push(storage);
      this.requests.push(-this.carried.length);
    }
    this.phases.push(this.cuda.phase);
  }

  /** Where the step reads the allocator (after forward, after backward, ...). */
  mark(): void {
    this.marks.push(this.requests.length);
  }
}

/** A recorded step, ready to replay; `prepare` returns null when it cannot be replayed exactly. */
export class StepProgram {
  private readonly sizes: number[];
  private readonly labels: string[];
  private readonly categories: MemoryCategory[];
  private readonly allocatorLabels: string[];
  private readonly requests: Int32Array;
  private readonly phases: string[];
  private readonly marks: number[];
  /** For the j-th storage of the previous step freed: which of that step's storages it is. */
  private readonly carriedFrom: Int32Array;
  /** The phase the step ends in. */
  private readonly endPhase: string;
  /** The previous step's storages (the recorded step's, then each replayed step's). */
  private previous: Storage[];

  private constructor(r: StepRecorder, carriedFrom: Int32Array, endPhase: string) {
    this.sizes = r.storages.map((s) => s.nbytes);
    // What the storages are called once the step is over (AccumulateGrad renames the gradient it steals).
    this.labels = r.storages.map((s) => s.label);
    this.categories = r.storages.map((s) => s.category);
    this.allocatorLabels = r.allocatorLabels;
    this.requests = Int32Array.from(r.requests);
    this.phases = r.phases;
    this.marks = r.marks;
    this.carriedFrom = carriedFrom;
    this.endPhase = endPhase;
    this.previous = r.storages;
  }

  /**
   * The recorded step as a program for the next ones, or null: the storages it freed from the step before must
   * pair one to one with those it leaves to the next (same label, category and size; among equals, in allocation
   * order), and the step before must have allocated them (`stepStartEvent`: the simulated GPU's event counter when
   * that step began).
   */
  static prepare(r: StepRecorder, previousStepStartEvent: number, microSteps: number, endPhase: string): StepProgram | null {
    if (r.marks.length !== 2 * microSteps + 2) return null;
    const key = (s: Storage) => `${s.category}\u0000${s.nbytes}\u0000${s.label}`;
    const left = new Map<string, number[]>();
    r.storages.forEach((s, k) => {
      if (s.block === null) return;
      const list = left.get(key(s));
      if (list) list.push(k);
      else left.set(key(s), [k]);
    });
    const freedBefore = new Map<string, Storage[]>();
    for (const s of r.carried) {
      if (s.allocEvent <= previousStepStartEvent) return null; // not the previous step's: another program
      const list = freedBefore.get(key(s));
      if (list) list.push(s);
      else freedBefore.set(key(s), [s]);
    }
    if (left.size !== freedBefore.size) return null;
    const rank = new Map<Storage, number>();
    for (const [k, olds] of freedBefore) {
      const news = left.get(k);
      if (!news || news.length !== olds.length) return null;
      olds.sort((a, b) => a.allocEvent - b.allocEvent).forEach((s, i) => rank.set(s, news[i]!));
    }
    return new StepProgram(r, Int32Array.from(r.carried, (s) => rank.get(s)!), endPhase);
  }

  /**
   * Runs the step again on the simulated GPU: each request in order, in its phase. Throws the allocator's
   * OutOfMemoryError as the full step would have.
   */
  replay(cuda: CudaDevice, marks: StepMarks): void {
    const previous = this.previous;
    const current: Storage[] = new Array(this.sizes.length);
    const requests = this.requests;
    const readAt = this.marks;
    let nextMark = 0;
    const read = () => {
      const bytes = cuda.allocator.allocatedBytes;
      if (nextMark === readAt.length - 2) marks.after_optimizer_step_bytes = bytes;
      else if (nextMark === readAt.length - 1) marks.after_zero_grad_bytes = bytes;
      else if (nextMark % 2 === 0) marks.after_forward_bytes.push(bytes);
      else marks.after_backward_bytes.push(bytes);
      nextMark++;
    };
    for (let i = 0; i < requests.length; i++) {
      while (nextMark < readAt.length && readAt[nextMark] === i) read();
      cuda.phase = this.phases[i]!;
      const r = requests[i]!;
      if (r < 0) cuda.freeStorage(previous[this.carriedFrom[-r - 1]!]!);
      else if ((r & 1) === 0) {
        const k = r >> 1;
        current[k] = cuda.allocateStorage(this.sizes[k]!, this.labels[k]!, this.categories[k]!, this.allocatorLabels[k]!);
      } else cuda.freeStorage(current[r >> 1]!);
    }
    while (nextMark < readAt.length) read();
    cuda.phase = this.endPhase;
    this.previous = current;
  }
}
