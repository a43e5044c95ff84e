/**
 * Note [Replayed runs]: a simulation run again through the allocator alone.
 *
 * What a model asks of the caching allocator does not depend on the allocator (Note [Replayed steps]: cuDNN's plan
 * fallback aside, and models with convolutions are never replayed): the same plan simulated with other allocator
 * settings (`expandable_segments`, a memory cap, another amount of device memory) sends it the same mallocs and
 * frees in the same order; only what the allocator does with them differs. memplan simulates such plans again and
 * again: advice tries the plan with expandable segments (under the batch goal at the search's answer, which the
 * search simulated last, for what is live at its peak), `needed_bytes` is the plan without its cap, the app's
 * worker re-simulates a plan whose cap or allocator settings changed (or that did not change).
 *
 * So a simulation records every request from loading the model to the end of its recorded step, and a later
 * simulation of the same program replays them: loading, the steps before the recorded one and that one, then the
 * recorded step's program (Note [Replayed steps]) for as many steps as the steady-state rule runs. The program is
 * the model, the training settings and the GPU's figures the model and ops read (`programKey`): compute
 * capability and vendor (attention backends), the cuBLAS workspace, the SM count and threads per SM (reduction
 * buffers). The allocator is simulated as always; the marks are read where the steps read them; storages get
 * their final labels, and their labels at a failing request (RequestTape). An out-of-memory error where the full
 * simulation would unwind frames that free memory is left to the full simulation, as for replayed steps.
 *
 * Runs whose peak details are wanted are recorded (the answers a user reads: a simulation, a search's answer),
 * not a search's trials, and the last kMaxRecordedRuns are kept in this process (the CLI's, the app's worker).
 * test/engine/train/run-replay.test.ts compares replayed runs with full simulations, every field, on calibration
 * and boundary-suite plans under other allocator settings and caps.
 */
import type { CudaDevice } from '../tensor/cuda.ts';
import type { Storage } from '../tensor/tensor.ts';
import type { DeviceSpec } from '../gpu/device.ts';
import type { Plan } from '../plan/schema.ts';
import { RequestTape, type StepMarks, type StepProgram, type StepRecorder } from './step-replay.ts';

/**
 * Recordings kept: a plan and its variants (advice simulates up to 7). Each is a few MB for a 70B model, and what
 * the heap holds slows every garbage collection of the simulations that follow.
 */
const kMaxRecordedRuns = 4;

/** Requests kept in all recordings together (about 40 bytes each): bounds the memory they hold. */
const kMaxRecordedRequests = 1_000_000;

/** Everything that decides a simulation's storage requests (equal keys: equal requests). */
export function programKey(plan: Plan, spec: DeviceSpec): string {
  return JSON.stringify([
    plan.model,
    plan.training,
    spec.compute_capability,
    spec.vendor,
    spec.cublas_workspace_bytes,
    spec.multi_processor_count,
    spec.max_threads_per_multi_processor,
  ]);
}

/** A run's requests from loading the model to the end of its recorded step, and the program after it. */
export class RecordedRun {
  private readonly tape: RequestTape;
  /** The request each step begins at (step 1 first); loading is what comes before. */
  private readonly stepStarts: readonly number[];
  /** Marks a step reads (forward and backward per micro-step, after the optimizer step, after zero_grad). */
  private readonly marksPerStep: number;
  /** The step whose program replays the later steps. */
  readonly recordedStep: number;
  private readonly program: StepProgram;
  /** The recorded step's storages, in the program's order, by their index in the run. */
  private readonly programStorages: Int32Array;

  /** What the model's code told autograd and a replay does not run: reentrant checkpointed blocks without a gradient input (per forward). */
  readonly reentrantBlocksWithoutGrad: number;

  constructor(run: StepRecorder, step: StepRecorder, program: StepProgram, recordedStep: number, marksPerStep: number, reentrantBlocksWithoutGrad: number) {
    this.reentrantBlocksWithoutGrad = reentrantBlocksWithoutGrad;
    this.tape = new RequestTape(run);
    this.stepStarts = run.stepStarts;
    this.marksPerStep = marksPerStep;
    this.recordedStep = recordedStep;
    this.program = program;
    const programStorages = (this.programStorages = new Int32Array(step.storages.length));
    for (let k = 0; k < programStorages.length; k++) programStorages[k] = run.indexOf(step.storages[k]!);
  }

  get requestCount(): number {
    return this.tape.requests.length;
  }

  /** The last replay ran out of memory where the full simulation would stop with the same state. */
  get oomAsFull(): boolean {
    return this.tape.oomAsFull;
  }

  /** The storages of a replay, by their index in the run (filled as it goes). */
  newStorages(): Storage[] {
    return new Array<Storage>(this.tape.storageCount);
  }

  /** Loading the model: its parameters and buffers, one by one. */
  replayLoad(cuda: CudaDevice, storages: Storage[]): void {
    this.tape.replay(cuda, 0, this.stepStarts[0]!, 0, 0, null, storages);
  }

  /** Step `step` (1 to recordedStep) as it ran; after the recorded one, the program goes on from it (`program`). */
  replayStep(step: number, cuda: CudaDevice, marks: StepMarks, storages: Storage[]): void {
    const from = this.stepStarts[step - 1]!;
    const to = step < this.stepStarts.length ? this.stepStarts[step]! : this.tape.requests.length;
    this.tape.replay(cuda, from, to, (step - 1) * this.marksPerStep, step * this.marksPerStep, marks, storages);
    cuda.phase = 'zero_grad';
  }

  /** The recorded step's program, to replay the steps after it from this replay's storages. */
  programAfter(storages: readonly Storage[]): StepProgram {
    this.program.seat(Array.from(this.programStorages, (k) => storages[k]!));
    return this.program;
  }
}

/** Recordings by program key, least recently used first. */
const recordings = new Map<string, RecordedRun>();
let recordedRequests = 0;

/** The recording of a program simulated before in this process, if one is kept. */
export function recordedRun(key: string): RecordedRun | undefined {
  const run = recordings.get(key);
  if (run) {
    recordings.delete(key);
    recordings.set(key, run);
  }
  return run;
}

/** Keeps a recording, forgetting the least recently used ones past the limits. */
export function keepRecordedRun(key: string, run: RecordedRun): void {
  const old = recordings.get(key);
  if (old) {
    recordings.delete(key);
    recordedRequests -= old.requestCount;
  }
  recordings.set(key, run);
  recordedRequests += run.requestCount;
  for (const [k, r] of recordings) {
    if (recordings.size <= kMaxRecordedRuns && recordedRequests <= kMaxRecordedRequests) break;
    recordings.delete(k);
    recordedRequests -= r.requestCount;
  }
}

/** Forgets every recording (tests compare full simulations with replayed ones). */
export function forgetRecordedRuns(): void {
  recordings.clear();
  recordedRequests = 0;
}
