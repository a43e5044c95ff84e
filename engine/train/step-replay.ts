/**
 * Note [Replayed steps]: steps after the first repeatable one, run through the allocator alone.
 *
 * Every step after the first runs the same program (Note [Steady state], steady-state.ts): the same tensors in the
 * same order, so the same storages are allocated and freed in the same order, whatever the allocator does with
 * them. Which blocks they get, whether a segment is reserved, released and retried, is the allocator's business and
 * stays simulated: a replayed step sends the allocator exactly the requests the model, the ops and autograd would
 * have sent (`malloc(size)` and `free(block)` in order), without running that code again. What the simulated GPU
 * keeps per storage (events, the peak and what is live there, the timeline) is kept for the replayed storages too;
 * where nothing would read a storage (a search's trial: no peak details, no recorder), blocks stand for them.
 *
 * The program's requests depend on the allocator's state in one place: cuDNN's plan fallback (ops/conv.ts), which
 * catches an out-of-memory error, empties the cache and asks for other workspaces. A model with convolutions is
 * therefore never replayed. An out-of-memory error in a replayed step ends the step as in the full simulation.
 * Where the full step would then unwind frames that free memory (a checkpointed region's recomputation releases
 * what its scope holds, an autocast region its casts, Mixtral's Python frames their locals: `CudaDevice.unwindingFrames`
 * counts them), the replay cannot know those frees: `simulate`
 * runs the plan again without replay (engine/train/simulate.ts). Where none was
 * open, as for every failing request of the bench's searches (GPT-2 XL, Llama 2 70B and 405B: all in backward,
 * outside recomputation), the full simulation frees nothing more before it stops, and the replay's state is its
 * state: the step's storages then carry the labels they had at the failing request (a gradient AccumulateGrad
 * steals later in the step keeps its first name), and the replayed result is the full one.
 *
 * A step also frees what the previous step left (its inputs and loss, rebound; GradScaler's found_inf): the
 * recorded step frees storages of the step before it, and a replayed step frees the same storages of its own
 * previous step. They are matched by what they are (label, category and size) and, among equals, by the order
 * they were allocated in; every storage the recorded step leaves must be one the next step frees, and the other way
 * round, or nothing is replayed. test/engine/train/step-replay.test.ts compares replayed and full simulations,
 * every field of the result, on every calibration and boundary-suite plan.
 */
import type { Block } from '../allocator/block.ts';
import type { CudaDevice, StorageObserver } from '../tensor/cuda.ts';
import type { MemoryCategory, Storage } from '../tensor/tensor.ts';

/** What a replayed step reads at the points the full step reads the allocator (the StepResult's fields). */
export interface StepMarks {
  after_forward_bytes: number[];
  after_backward_bytes: number[];
  after_optimizer_step_bytes: number;
  after_zero_grad_bytes: number;
}

/**
 * A storage renamed while recording (AccumulateGrad steals a gradient): the number of requests made by then, and
 * the label and category it had before (what it is called at a failing request before the rename).
 */
interface Rename {
  at: number;
  label: string;
  category: MemoryCategory;
}

/**
 * The allocator's allocated bytes where a step reads them, marks [from, to) of a recording in order: after each
 * micro-step's forward and backward, after the optimizer step, after zero_grad (none kept when `into` is null:
 * marks outside a step).
 */
class MarkReader {
  /** The next mark to read. */
  next: number;
  private readonly cuda: CudaDevice;
  private readonly from: number;
  private readonly to: number;
  private readonly into: StepMarks | null;

  constructor(cuda: CudaDevice, from: number, to: number, into: StepMarks | null) {
    this.cuda = cuda;
    this.from = from;
    this.to = to;
    this.into = into;
    this.next = from;
  }

  read(): void {
    const bytes = this.cuda.allocator.allocatedBytes;
    const into = this.into;
    const mark = this.next++;
    if (into === null) return;
    if (mark === this.to - 2) into.after_optimizer_step_bytes = bytes;
    else if (mark === this.to - 1) into.after_zero_grad_bytes = bytes;
    else if ((mark - this.from) % 2 === 0) into.after_forward_bytes.push(bytes);
    else into.after_backward_bytes.push(bytes);
  }
}

/**
 * Records one step's storage requests as the simulated GPU makes them (or a run's from loading on: Note [Replayed
 * runs]). This runs for every request of a recorded step: the storage and the request; what rarely changes (the
 * phase, whether frames that free memory on an exception are open, renames, an allocator label other than the
 * storage's) is kept where it changes. The storages' sizes and names are read off them when the recording is over
 * (RequestTape).
 */
export class StepRecorder implements StorageObserver {
  private readonly cuda: CudaDevice;
  /** The simulated GPU's storage serial number of the first storage recorded (`Storage.serial`). */
  private readonly firstSerial: number;
  /** Storages allocated in the step, in order (storage k has serial firstSerial + k). */
  readonly storages: Storage[] = [];
  /** Per request: `2k` allocates storage k, `2k + 1` frees it, `-(j + 1)` frees the j-th storage of an earlier step. */
  readonly requests: number[] = [];
  /** Where the phase changed: from request phaseStarts[i] on, the phase is phaseNames[i]. */
  readonly phaseStarts: number[] = [];
  readonly phaseNames: string[] = [];
  /**
   * The requests where `CudaDevice.unwindingFrames` went from none to some or back (none before the first): an
   * out-of-memory error in between would unwind frames that free memory.
   */
  readonly unwindingChanges: number[] = [];
  private unwindingNow = false;
  /** Storages of earlier steps freed in this one, in order. */
  readonly carried: Storage[] = [];
  /** The number of requests made when each mark (forward, backward, ... zero_grad) was read. */
  readonly marks: number[] = [];
  /** Renamed storages, by index. */
  readonly renames = new Map<number, Rename>();
  /**
   * The label the allocator was given for a storage, where it was not the storage's own label then (few: a replay
   * allocates a renamed storage under its first name). Its size, labels and category are read off the storages
   * once the recording is over (RequestTape), not pushed per request: this runs for every request of a recording.
   */
  readonly allocatorLabelsApart = new Map<number, string>();
  /** A storage was renamed twice, or one of an earlier step was: an out-of-memory error cannot be replayed exactly. */
  renamesUntracked = false;

  constructor(cuda: CudaDevice) {
    this.cuda = cuda;
    this.firstSerial = cuda.storageSerials;
  }

  /** Notes the phase and the unwinding frames as they are for the next request. */
  private context(): void {
    const cuda = this.cuda;
    const n = this.phaseNames.length;
    if (n === 0 || this.phaseNames[n - 1] !== cuda.phase) {
      this.phaseStarts.push(this.requests.length);
      this.phaseNames.push(cuda.phase);
    }
    if (cuda.unwindingFrames > 0 !== this.unwindingNow) {
      this.unwindingNow = !this.unwindingNow;
      this.unwindingChanges.push(this.requests.length);
    }
  }

  allocated(storage: Storage, allocatorLabel: string): void {
    this.context();
    const k = this.storages.length;
    this.storages.push(storage);
    if (allocatorLabel !== storage.label) this.allocatorLabelsApart.set(k, allocatorLabel);
    this.requests.push(2 * k);
  }

  renaming(storage: Storage): void {
    const k = this.indexOf(storage);
    if (k < 0 || this.renames.has(k)) this.renamesUntracked = true;
    else this.renames.set(k, { at: this.requests.length, label: storage.label, category: storage.category });
  }

  freed(storage: Storage): void {
    this.context();
    const k = this.indexOf(storage);
    if (k >= 0) this.requests.push(2 * k + 1);
    else {
      this.carried.push(storage);
      this.requests.push(-this.carried.length);
    }
  }

  /** Where the step reads the allocator (after forward, after backward, ...). */
  mark(): void {
    this.marks.push(this.requests.length);
  }

  /**
   * The number of requests made where the step's code frees what the previous step left (its inputs, its loss and
   * graph): before and after each such place (Note [Replayed second step], second-step.ts).
   */
  readonly cuts: number[] = [];

  cut(): void {
    this.cuts.push(this.requests.length);
  }

  /** The number of requests made when each step began (a run's recording: Note [Replayed runs]). */
  readonly stepStarts: number[] = [];

  beginStep(): void {
    this.stepStarts.push(this.requests.length);
  }

  /** The index of a storage allocated while recording (-1: an earlier one). */
  indexOf(storage: Storage): number {
    const k = storage.serial - this.firstSerial;
    return k >= 0 && k < this.storages.length ? k : -1;
  }
}

/** Two recorders hearing the same requests (a run's and its recorded step's). */
export class BothRecorders implements StorageObserver {
  private readonly a: StorageObserver;
  private readonly b: StorageObserver;

  constructor(a: StorageObserver, b: StorageObserver) {
    this.a = a;
    this.b = b;
  }

  allocated(storage: Storage, allocatorLabel: string): void {
    this.a.allocated(storage, allocatorLabel);
    this.b.allocated(storage, allocatorLabel);
  }

  freed(storage: Storage): void {
    this.a.freed(storage);
    this.b.freed(storage);
  }

  renaming(storage: Storage): void {
    this.a.renaming(storage);
    this.b.renaming(storage);
  }
}

/**
 * Recorded storage requests, replayed range by range (a step, or the loading and the first steps of a run:
 * Note [Replayed runs], run-replay.ts): each request in order and in its phase, reading the allocator at the marks.
 */
export class RequestTape {
  private readonly sizes: Float64Array;
  private readonly labels: string[];
  private readonly categories: MemoryCategory[];
  /** The label the allocator was given for each storage (its first). */
  private readonly allocatorLabels: readonly string[];
  readonly requests: Int32Array;
  private readonly phaseStarts: readonly number[];
  private readonly phaseNames: readonly string[];
  private readonly unwindingChanges: readonly number[];
  readonly marks: number[];
  private readonly renames: ReadonlyMap<number, Rename>;
  private readonly renamesUntracked: boolean;
  /**
   * The last replay ran out of memory where the full simulation would stop with the same state (no frame that
   * frees memory was open): its result is the full simulation's.
   */
  oomAsFull = false;

  /**
   * The tape takes the recorder's arrays (the recording is over: the recorder is not used again) and, per storage,
   * its size, the label the allocator was given (its label when allocated: before its first rename, `renames`) and
   * what it is called once the recording is over (AccumulateGrad renames the gradient it steals). So it is made as
   * the recording ends, before anything renames a storage the recorder no longer hears (every tape is: the second
   * step's, the recorded step's, the run's).
   */
  constructor(r: StepRecorder) {
    const storages = r.storages;
    const n = storages.length;
    const sizes = (this.sizes = new Float64Array(n));
    const labels = (this.labels = new Array<string>(n));
    const categories = (this.categories = new Array<MemoryCategory>(n));
    const allocatorLabels = (this.allocatorLabels = new Array<string>(n));
    for (let k = 0; k < n; k++) {
      const s = storages[k]!;
      sizes[k] = s.nbytes;
      labels[k] = s.label;
      categories[k] = s.category;
      allocatorLabels[k] = s.label;
    }
    for (const [k, rename] of r.renames) allocatorLabels[k] = rename.label;
    for (const [k, label] of r.allocatorLabelsApart) allocatorLabels[k] = label;
    this.requests = new Int32Array(r.requests);
    this.phaseStarts = r.phaseStarts;
    this.phaseNames = r.phaseNames;
    this.unwindingChanges = r.unwindingChanges;
    this.marks = r.marks;
    this.renames = r.renames;
    this.renamesUntracked = r.renamesUntracked;
  }

  get storageCount(): number {
    return this.sizes.length;
  }

  /** The index in phaseStarts of the phase request i runs in. */
  private phaseAt(i: number): number {
    let p = 0;
    while (p + 1 < this.phaseStarts.length && this.phaseStarts[p + 1]! <= i) p++;
    return p;
  }

  /**
   * Replays requests [from, to) into `current` (the storages by recorded index), reading the allocator at marks
   * [markFrom, markTo) into `into`: a step's marks are forward and backward per micro-step, then after the
   * optimizer step and after zero_grad. `previous[carriedFrom[j]]` is the j-th storage of an earlier step freed.
   * Throws the allocator's OutOfMemoryError as the full simulation would have.
   */
  replay(cuda: CudaDevice, from: number, to: number, markFrom: number, markTo: number, into: StepMarks | null, current: Storage[], previous: readonly Storage[] = [], carriedFrom: Int32Array = new Int32Array(0)): void {
    this.oomAsFull = false;
    const requests = this.requests;
    const readAt = this.marks;
    const sizes = this.sizes;
    const labels = this.labels;
    const categories = this.categories;
    const allocatorLabels = this.allocatorLabels;
    const phaseStarts = this.phaseStarts;
    const marks = new MarkReader(cuda, markFrom, markTo, into);
    let phase = from < to ? this.phaseAt(from) : 0;
    if (from < to) cuda.phase = this.phaseNames[phase]!;
    for (let i = from; i < to; i++) {
      while (marks.next < markTo && readAt[marks.next] === i) marks.read();
      if (phase + 1 < phaseStarts.length && phaseStarts[phase + 1] === i) cuda.phase = this.phaseNames[++phase]!;
      const r = requests[i]!;
      if (r < 0) cuda.freeStorage(previous[carriedFrom[-r - 1]!]!);
      else if ((r & 1) === 0) {
        const k = r >> 1;
        try {
          current[k] = cuda.allocateStorage(sizes[k]!, labels[k]!, categories[k]!, allocatorLabels[k]!);
        } catch (error) {
          this.stopAt(i, k, current);
          throw error;
        }
      } else cuda.freeStorage(current[r >> 1]!);
    }
    while (marks.next < markTo) marks.read();
  }

  /**
   * `replay` where no storage would be read (`CudaDevice.allocateBlock`: no recorder listening, no peak details):
   * the same requests, the blocks alone in `current`, a block dropped once freed (merged blocks die young).
   */
  replayBlocks(cuda: CudaDevice, from: number, to: number, markFrom: number, markTo: number, into: StepMarks, current: (Block | null)[], previous: readonly (Block | null)[], carriedFrom: Int32Array): void {
    this.oomAsFull = false;
    const requests = this.requests;
    const readAt = this.marks;
    const sizes = this.sizes;
    const allocatorLabels = this.allocatorLabels;
    const phaseStarts = this.phaseStarts;
    const marks = new MarkReader(cuda, markFrom, markTo, into);
    let phase = from < to ? this.phaseAt(from) : 0;
    if (from < to) cuda.phase = this.phaseNames[phase]!;
    for (let i = from; i < to; i++) {
      while (marks.next < markTo && readAt[marks.next] === i) marks.read();
      if (phase + 1 < phaseStarts.length && phaseStarts[phase + 1] === i) cuda.phase = this.phaseNames[++phase]!;
      const r = requests[i]!;
      if (r < 0) cuda.freeBlock(previous[carriedFrom[-r - 1]!]!);
      else if ((r & 1) === 0) {
        const k = r >> 1;
        try {
          current[k] = cuda.allocateBlock(sizes[k]!, allocatorLabels[k]!);
        } catch (error) {
          this.stopAt(i, k, null);
          throw error;
        }
      } else {
        const k = r >> 1;
        cuda.freeBlock(current[k]!);
        current[k] = null;
      }
    }
    while (marks.next < markTo) marks.read();
  }

  /**
   * Replays every request as the full simulation made it, for recorders to hear as they would have heard it (Note
   * [Replayed second step], second-step.ts): each storage allocated under the label and category it had then and
   * renamed where it was, the frames that free memory on an exception open where they were
   * (`CudaDevice.unwindingFrames`). Storages with `skip[k]` set are not allocated (nor freed: the caller skips only
   * storages the recording never freed); requests [stops[2j], stops[2j + 1]) are not replayed: `at(j)` runs there
   * instead. `marked(j)` runs where mark j was read. Throws the allocator's OutOfMemoryError as the full simulation
   * would have, `oomAsFull` saying whether it would then stop with this state.
   */
  replayAsRecorded(cuda: CudaDevice, current: Storage[], skip: Uint8Array, stops: readonly number[], at: (j: number) => void, marked: (j: number) => void): void {
    this.oomAsFull = false;
    const requests = this.requests;
    const sizes = this.sizes;
    const labels = this.labels;
    const categories = this.categories;
    const allocatorLabels = this.allocatorLabels;
    const renames = this.renames;
    const renamedAt = [...renames].sort(([, a], [, b]) => a.at - b.at);
    const marks = this.marks;
    const phaseStarts = this.phaseStarts;
    const phaseNames = this.phaseNames;
    const unwindingChanges = this.unwindingChanges;
    const n = requests.length;
    let nextMark = 0;
    let nextStop = 0;
    let nextRename = 0;
    let nextUnwinding = 0;
    let phase = 0;
    const unwindingBefore = cuda.unwindingFrames;
    try {
      for (let i = 0; ; i++) {
        while (nextMark < marks.length && marks[nextMark] === i) marked(nextMark++);
        while (nextStop < stops.length && stops[nextStop] === i) {
          at(nextStop >> 1);
          i = stops[nextStop + 1]!;
          nextStop += 2;
          // the requests passed over: their phases (their frees renamed and opened nothing)
          while (phase < phaseStarts.length && phaseStarts[phase]! < i) cuda.phase = phaseNames[phase++]!;
          while (nextMark < marks.length && marks[nextMark] === i) marked(nextMark++);
        }
        while (nextRename < renamedAt.length && renamedAt[nextRename]![1].at <= i) {
          const k = renamedAt[nextRename++]![0];
          if (current[k]) cuda.rename(current[k]!, labels[k]!, categories[k]!);
        }
        while (nextUnwinding < unwindingChanges.length && unwindingChanges[nextUnwinding]! <= i) cuda.unwindingFrames += nextUnwinding++ % 2 === 0 ? 1 : -1;
        if (i === n) break;
        if (phase < phaseStarts.length && phaseStarts[phase] === i) cuda.phase = phaseNames[phase++]!;
        const r = requests[i]!;
        if (r < 0) throw new Error(`request ${i} frees a storage of an earlier step outside the step's own code`);
        if ((r & 1) === 0) {
          const k = r >> 1;
          if (skip[k]) continue;
          const rename = renames.get(k);
          try {
            current[k] = cuda.allocateStorage(sizes[k]!, rename ? rename.label : labels[k]!, rename ? rename.category : categories[k]!, allocatorLabels[k]!);
          } catch (error) {
            this.oomAsFull = !this.unwindingAt(i);
            throw error;
          }
        } else cuda.freeStorage(current[r >> 1]!);
      }
    } finally {
      cuda.unwindingFrames = unwindingBefore;
    }
  }

  /** Whether frames that free memory on an exception were open at request i. */
  private unwindingAt(i: number): boolean {
    let open = false;
    for (const change of this.unwindingChanges) {
      if (change > i) break;
      open = !open;
    }
    return open;
  }

  /**
   * Request i (allocating storage k) failed: the storages allocated before it get back the names they had at
   * that point of the full simulation (those renamed later; `current` null: blocks, no storages), and `oomAsFull` says whether the full simulation
   * would have stopped with this state.
   */
  private stopAt(i: number, k: number, current: Storage[] | null): void {
    if (this.unwindingAt(i) || this.renamesUntracked) return;
    if (current) for (const [j, rename] of this.renames) {
      if (j < k && rename.at > i && current[j]) {
        current[j]!.label = rename.label;
        current[j]!.category = rename.category;
      }
    }
    this.oomAsFull = true;
  }
}

/** A recorded step, ready to replay; `prepare` returns null when it cannot be replayed exactly. */
export class StepProgram {
  private readonly tape: RequestTape;
  /** For the j-th storage of the previous step freed: which of that step's storages it is. */
  private readonly carriedFrom: Int32Array;
  /** The phase the step ends in. */
  private readonly endPhase: string;
  /** The previous step's storages (the recorded step's, then each replayed step's). */
  private previous: readonly Storage[];
  /** The previous step's blocks, after a replay without storages (`replayBlocks`); then `previous` is stale. */
  private previousBlocks: readonly (Block | null)[] | null = null;

  private constructor(r: StepRecorder, carriedFrom: Int32Array, endPhase: string) {
    this.tape = new RequestTape(r);
    this.carriedFrom = carriedFrom;
    this.endPhase = endPhase;
    this.previous = r.storages;
  }

  /** The last replay ran out of memory where the full step would stop with the same state (RequestTape). */
  get oomAsFull(): boolean {
    return this.tape.oomAsFull;
  }

  /** Replays from here on after a step whose storages, in the recorded step's order, are `previous` (run-replay.ts). */
  seat(previous: readonly Storage[]): void {
    this.previous = previous;
    this.previousBlocks = null;
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
   * OutOfMemoryError as the full step would have (`oomAsFull` says whether the state it leaves is the full step's).
   */
  replay(cuda: CudaDevice, marks: StepMarks): void {
    const tape = this.tape;
    if (cuda.observer === null && !cuda.recordStorages) {
      // Nothing reads the storages (a search's trial): the blocks alone.
      const previous = this.previousBlocks ?? this.previous.map((s) => s.block);
      const current: (Block | null)[] = new Array(tape.storageCount).fill(null);
      tape.replayBlocks(cuda, 0, tape.requests.length, 0, tape.marks.length, marks, current, previous, this.carriedFrom);
      cuda.phase = this.endPhase;
      this.previousBlocks = current;
      return;
    }
    if (this.previousBlocks) throw new Error('a step replayed without storages cannot be followed by one with them');
    const current: Storage[] = new Array(tape.storageCount);
    tape.replay(cuda, 0, tape.requests.length, 0, tape.marks.length, marks, current, this.previous, this.carriedFrom);
    cuda.phase = this.endPhase;
    this.previous = current;
  }
}
