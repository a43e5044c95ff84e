/**
 * The standard training step, simulated (docs/plan-format.md): the model reaches the GPU parameter by parameter
 * in module order; each optimizer step runs `grad_accumulation_steps` micro-steps of (inputs on the GPU,
 * forward and loss, `loss / grad_accumulation_steps`, backward), then `optimizer.step()` and
 * `optimizer.zero_grad(set_to_none=True)`. Python's reference semantics decide the frees: the previous
 * micro-step's inputs and loss die when the new ones are bound.
 */
import { Autograd, Parameter } from '../autograd/engine.ts';
import { CachingAllocator, OutOfMemoryError, type TraceListener } from '../allocator/caching-allocator.ts';
import { parseAllocatorConf } from '../allocator/config.ts';
import { SimulatedDevice } from '../allocator/device-memory.ts';
import { formatSize, memorySummary } from '../allocator/format.ts';
import { layerListModel } from '../models/layer-list.ts';
import { checkHeadPrecision, resolveHfConfig, type HfConfig } from '../models/hf/config.ts';
import { hfModel } from '../models/hf/index.ts';
import { torchvisionModel } from '../models/torchvision.ts';
import { PRESETS } from '../models/presets.ts';
import { applyFineTuning, fineTuningOf, unmatchedModulesToSave, unmatchedTargets } from '../models/peft/lora.ts';
import { InputError } from '../errors.ts';
import type { TrainableModel } from '../models/model.ts';
import { Autocast } from '../ops/autocast.ts';
import { divScalar } from '../ops/pointwise.ts';
import type { Runtime } from '../ops/runtime.ts';
import type { Plan } from '../plan/schema.ts';
import { CudaDevice } from '../tensor/cuda.ts';
import type { DType } from '../tensor/dtype.ts';
import { nbytes, type Storage, type Tensor } from '../tensor/tensor.ts';
import { Optimizer } from './optimizer.ts';
import { GradScaler } from './grad-scaler.ts';
import { SteadyStates, allocatorState } from './steady-state.ts';
import { LIMITS } from '../plan/limits.ts';
import { BothRecorders, StepProgram, StepRecorder } from './step-replay.ts';
import { RecordedRun, keepRecordedRun, programKey, recordedRun } from './run-replay.ts';
import { NotReplayable, SecondStepProgram } from './second-step.ts';
import { BlocksNotReusable } from '../models/block-reuse.ts';
import { DEFAULT_GPU, capBytes, convWorkspacesFor, type DeviceSpec } from '../gpu/device.ts';
import { outsideAllocatorBytes } from '../gpu/catalog.ts';
import { RESULT_SCHEMA_VERSION } from '../result/version.ts';
import { caveatsFor } from '../result/caveats.ts';
import { DEFAULT_TIMELINE_POINTS, decimateTimeline } from '../result/timeline.ts';
import type { Breakdown, SimulateResult, StepResult } from '../result/simulate.ts';
import type { LiveTensor, Note } from '../result/index.ts';

export type { DeviceSpec };

/** cuBLASLt's workspace (`CUBLASLT_WORKSPACE_SIZE`, 1024 KiB by default), measured separate from cuBLAS's on the H100. */
const kCublasLtWorkspaceBytes = 1_048_576;

/** Steps simulated at most while waiting for the allocator's state to repeat (Note [Steady state]). */
const kMaxSteps = 20;

const PARAM_DTYPE: Record<Plan['training']['precision'], DType> = {
  fp32: 'float32',
  amp_fp16: 'float32',
  amp_bf16: 'float32',
  bf16: 'bfloat16',
  fp16: 'float16',
};

/** A model's size as its parameter list gives it: parameters (and those that require grad), their bytes, buffers. */
export function modelSummary(model: TrainableModel): SimulateResult['model'] {
  const summary = { parameter_count: 0, trainable_parameter_count: 0, parameter_bytes: 0, buffer_bytes: 0 };
  for (const p of model.parameters) {
    if (p.buffer) summary.buffer_bytes += nbytes(p.shape, p.dtype);
    else {
      const numel = p.shape.reduce((n, d) => n * d, 1);
      summary.parameter_count += numel;
      if (!p.frozen) summary.trainable_parameter_count += numel;
      summary.parameter_bytes += nbytes(p.shape, p.dtype);
    }
  }
  return summary;
}

/** The model a plan trains on a device: built, with its LoRA adapters and frozen parameters (`training`). */
export function planModel(plan: Plan, device: DeviceSpec): TrainableModel {
  return applyFineTuning(buildModel(plan, device), fineTuningOf(plan.training));
}

function buildModel(plan: Plan, device: DeviceSpec): TrainableModel {
  const m = plan.model;
  const t = plan.training;
  const dtype = PARAM_DTYPE[t.precision];
  const checkpointing = t.activation_checkpointing;
  const attentionDevice = { computeCapability: device.compute_capability, vendor: device.vendor };
  const workspaces = convWorkspacesFor(device.conv_workspaces);
  if ('layers' in m && 'input_features' in m) return layerListModel(m.layers, [m.input_features], dtype, checkpointing, attentionDevice, workspaces);
  if ('layers' in m) return layerListModel(m.layers, m.input_shape, dtype, checkpointing, attentionDevice, workspaces);
  const hfOptions = { dtype, seqLen: t.seq_len, attention: t.attention, checkpointing, device: attentionDevice, tuning: fineTuningOf(t) };
  const visionOptions = (numClasses: number) => ({ dtype, imageSize: t.image_size, numClasses, checkpointing, convWorkspaces: workspaces, device: attentionDevice });
  // a plan's variant (advice, compare) changes the precision after the plan was checked
  const hf = (cfg: HfConfig) => {
    checkHeadPrecision(cfg, t.precision);
    return hfModel(cfg, hfOptions);
  };
  if ('preset' in m) {
    const preset = PRESETS[m.preset]!;
    if (preset.kind === 'hf') return hf(resolveHfConfig(preset.config));
    return torchvisionModel(preset.name, visionOptions(m.num_classes ?? 1000));
  }
  if ('hf_config' in m) return hf(resolveHfConfig(m.hf_config));
  return torchvisionModel(m.torchvision, visionOptions(m.num_classes));
}


export interface SimulateOptions {
  /** The GPU (the plan's gpu.name resolved by the caller, or the default GPU). */
  device: DeviceSpec;
  /** Decimate the timeline to about this many points (default 2000; 0 records none). */
  timelinePoints?: number;
  /**
   * Capture what is live at the peak (the breakdown, the largest tensors; default true). A search's trials only
   * need the peaks.
   */
  peakDetails?: boolean;
  /** Every allocator trace entry, as a PyTorch memory snapshot would record it. */
  onTrace?: TraceListener;
  /**
   * Run on past the plan's steps until the allocator's state repeats (default true: Note [Steady state]). False
   * runs exactly `training.steps`, as a recording of that many steps did.
   */
  untilSteady?: boolean;
  /**
   * On an out-of-memory error, simulate once more with no cap and unbounded memory to report what the plan needs
   * (`needed_bytes`; default true). Search trials leave it off.
   */
  neededOnOom?: boolean;
  /**
   * Replay the steps after the first repeatable one through the allocator alone (Note [Replayed steps],
   * engine/train/step-replay.ts), and a program simulated before in this process whole (Note [Replayed runs],
   * engine/train/run-replay.ts; default true unless `onTrace` is given). The result is the same either way.
   */
  replaySteps?: boolean;
  /**
   * Keep this run's requests for a later simulation of the same program (Note [Replayed runs]; default: when the
   * peak's details are wanted, as for the answers a user reads). A search's trials, which only need the peaks, are
   * seldom simulated again: recording them would cost more than it saves.
   */
  recordRun?: boolean;
  /**
   * Replay repeated blocks of the first step from recordings of other blocks (Note [Reused blocks],
   * models/block-reuse.ts; default: unless `onTrace` is given). The result is the same either way.
   */
  reuseBlocks?: boolean;
  /**
   * Storage events (allocations and frees) past which no step is added to reach steady state: the plan's own
   * steps always run (engine/plan/limits.ts bounds them before a simulation starts), the steps after them only
   * while the next one, as long as the last, stays within this budget (default `LIMITS.events`, about 10 s).
   */
  maxEvents?: number;
}

/**
 * Memory of the "unbounded" GPU `needed_bytes` is simulated on: 64 TiB, as much as the simulated address space
 * holds below where CUDA places device memory (allocator/device-memory.ts), and far above any plan's needs.
 */
export const UNBOUNDED_MEMORY_BYTES = 2 ** 46;

/** The largest device whose segments are placed by the CUDA driver's rule: 16 TiB (every real GPU is far below). */
const kDriverPlacementMaxBytes = 2 ** 44;

/** The plan's GPU with unbounded memory: what a plan needs, free of any cap (`needed_bytes`). */
export function unboundedDevice(spec: DeviceSpec): DeviceSpec {
  return { ...spec, total_memory_bytes: UNBOUNDED_MEMORY_BYTES };
}

/*
 * Note [Library handles]
 * ~~~~~~~~~~~~~~~~~~~~~~
 * A training process's memory outside the caching allocator grows once, when its first backward begins: autograd's
 * device thread creates its own cuBLAS handle and, where cuDNN runs, cuDNN handles, from the device and not through
 * the allocator. Measured alone on the H100 (test/fixtures/device/h100_training_outside.json): 718 MB after the
 * first matmul (the catalog's non_pytorch_bytes), 804 MB from step 1's backward on, in every later step the same
 * (the catalog's training_threads_bytes is the difference). PyTorch frees no cached blocks for these handles: when
 * the allocator has reserved their room during step 1's forward, creating them fails, and the run with it (the
 * whole-GPU ResNet-18 AMP runs from batch 6644 on the H100: CUBLAS_STATUS_ALLOC_FAILED at cublasCreate, or
 * CUDNN_STATUS_INTERNAL_ERROR, with 84.22-84.35 GB reserved). So the simulated device offers the allocator
 * total_memory_bytes - non_pytorch_bytes until the first backward, which needs training_threads_bytes free on the
 * device and keeps them (memoryAvailableToPyTorch: what is left from then on).
 */
function createAutogradThreadHandles(device: SimulatedDevice, bytes: number): void {
  const free = device.freeBytes;
  if (free < bytes) {
    throw new OutOfMemoryError(
      `CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling \`cublasCreate(handle)\`: the first backward's thread needs ${formatSize(bytes)} of GPU memory outside PyTorch's allocator for its cuBLAS and cuDNN handles, and ${formatSize(Math.max(0, free))} is free: the caching allocator reserved the rest during the forward (PyTorch frees no cached blocks for library handles)`,
      bytes,
      bytes,
    );
  }
  device.capacityBytes -= bytes;
}

/**
 * Peak reserved and allocated of the plan with no cap on unbounded memory (the plan's GPU otherwise); null when it
 * runs out even there: it needs more than UNBOUNDED_MEMORY_BYTES, and the peaks it reached are not what it needs.
 */
export function neededMemory(plan: Plan, spec: DeviceSpec): { peak_reserved_bytes: number; peak_allocated_bytes: number } | null {
  const { gpu: _cap, ...uncapped } = plan;
  const r = simulate(uncapped as Plan, { device: unboundedDevice(spec), timelinePoints: 0, peakDetails: false, neededOnOom: false });
  return r.oom === null ? { peak_reserved_bytes: r.peak_reserved_bytes, peak_allocated_bytes: r.peak_allocated_bytes } : null;
}

export function simulate(plan: Plan, options: SimulateOptions): SimulateResult {
  const t = plan.training;
  const spec = options.device;
  const memoryLimitBytes = plan.gpu && 'memory_limit_bytes' in plan.gpu ? plan.gpu.memory_limit_bytes : undefined;
  // The cap is `set_per_process_memory_fraction(limit / total)`, and the allocator keeps
  // `allowed_memory_maximum = static_cast<size_t>(fraction * totalGlobalMem)`: the double rounding can leave it a
  // byte under the limit (2 GiB on the H100: 2,147,483,647 B, as the measurement script's `allowed_bytes`), and a
  // run whose segments fill the cap exactly then runs out (measured: the ReLU MLP with checkpointing at 19,584).
  const allowedBytes = memoryLimitBytes === undefined ? undefined : Math.floor((memoryLimitBytes / spec.total_memory_bytes) * spec.total_memory_bytes);
  // Until the first backward the device offers the allocator all but the context; then autograd's thread takes
  // training_threads_bytes for its library handles (Note [Library handles]).
  // Segments land where the CUDA driver puts them (Note [cudaMalloc placement]). A device larger than
  // kDriverPlacementMaxBytes (a custom one, or the unbounded GPU of `needed_bytes`) would have expandable segments
  // reserve 1.125 times its memory of addresses each, more than a process's address space holds: its segments are
  // handed out top-down from the highest address, which needs no such room
  const placement = spec.total_memory_bytes > kDriverPlacementMaxBytes ? 'top-down' : 'cuda-driver';
  const deviceMemory = new SimulatedDevice(spec.total_memory_bytes - spec.non_pytorch_bytes, placement);
  const allocator = new CachingAllocator({
    config: parseAllocatorConf(plan.allocator.conf, 'allocator.conf'),
    device: deviceMemory,
    totalGlobalMemBytes: spec.total_memory_bytes,
    memoryLimitBytes: allowedBytes,
    nonPyTorchBytes: outsideAllocatorBytes(spec),
    onTrace: options.onTrace,
  });
  const cuda = new CudaDevice(
    allocator,
    { cublasBytes: spec.cublas_workspace_bytes, cublasLtBytes: kCublasLtWorkspaceBytes },
    { multiProcessorCount: spec.multi_processor_count, maxThreadsPerMultiProcessor: spec.max_threads_per_multi_processor },
  );
  cuda.onFirstBackward = () => createAutogradThreadHandles(deviceMemory, spec.training_threads_bytes);
  const autograd = new Autograd(cuda);
  // Note [Reused blocks]: not under a trace, whose every entry a test compares
  const rt: Runtime = { cuda, autograd, autocast: null, reuseBlocks: options.reuseBlocks ?? options.onTrace === undefined };
  const autocastDType = t.precision === 'amp_bf16' ? 'bfloat16' : t.precision === 'amp_fp16' ? 'float16' : null;
  const scaler = t.precision === 'amp_fp16' ? new GradScaler() : null;
  if (t.lora && t.lora.quantization !== 'none') {
    throw new InputError('training.lora.quantization', `${t.lora.quantization === '4bit' ? 'a 4-bit' : 'an 8-bit'} base (QLoRA) needs bitsandbytes, whose memory is not modelled; plan the bf16 base instead`);
  }
  const model = planModel(plan, spec);

  cuda.recordTimeline = options.timelinePoints !== 0;
  cuda.recordStorages = options.peakDetails !== false;

  const steps: StepResult[] = [];
  let oom: SimulateResult['oom'] = null;
  /** Steps run without the allocator's state repeating (Note [Steady state]), and what stopped them. */
  let unsettled: { steps: number; reason: 'max_steps' | 'work_limit' | 'garbage_collection' } | null = null;
  const params: Parameter[] = [];
  let optimizer: Optimizer | null = null;
  const replaySteps = options.replaySteps ?? options.onTrace === undefined;
  let program: StepProgram | null = null;
  /** The replay running now, or that ran the allocator to where it is: an out-of-memory error was its. */
  let replaying: { readonly oomAsFull: boolean } | null = null;
  // Note [Replayed runs]: the same program simulated before in this process is replayed whole; else this one is
  // recorded, to the end of its recorded step.
  const key = replaySteps ? programKey(plan, spec) : null;
  const recorded = key === null ? undefined : recordedRun(key);
  const replayed: Storage[] = recorded ? recorded.newStorages() : [];
  // reentrant checkpointed blocks whose input needs no gradient, in the first forward (a replayed run's recording)
  let blocksWithoutGrad: number | null = recorded ? recorded.reentrantBlocksWithoutGrad : null;
  let runRecorder: StepRecorder | null = key !== null && !recorded && (options.recordRun ?? options.peakDetails !== false) ? new StepRecorder(cuda) : null;
  // a recorded run's storages keep their labels for the runs that replay it (Note [Replayed runs])
  if (runRecorder) rt.blockLabels = true;
  try {
    cuda.phase = 'load';
    cuda.observer = runRecorder;
    if (recorded) {
      replaying = recorded;
      recorded.replayLoad(cuda, replayed);
    } else {
      for (const p of model.parameters) {
        const tensor = cuda.empty(p.shape, p.dtype, p.name, 'parameter'); // buffers count with the parameters
        if (!p.buffer && !p.frozen) params.push(new Parameter(p.name, tensor, cuda)); // frozen: requires_grad False
        model.tensors.set(p.name, tensor);
      }
      // the forward reads a tied module's weight by the module's own name, and a modules_to_save copy by its
      // original's: the copy runs where its module runs (ModulesToSaveWrapper.forward)
      for (const [name, weight] of Object.entries(model.tiedWeights ?? {})) model.tensors.set(name, model.tensors.get(weight)!);
      for (const p of model.parameters) for (const name of p.runsAs ?? []) model.tensors.set(name, model.tensors.get(p.name)!);
      const order = model.optimizerOrder;
      const byName = new Map(params.map((p) => [p.name, p]));
      // the order names frozen parameters too (named_parameters()): they are not the optimizer's
      const trained = order ? order.filter((n) => byName.has(n)) : null;
      if (trained && trained.length !== params.length) throw new Error(`the optimizer order lists ${trained.length} of the ${params.length} parameters that train`);
      optimizer = new Optimizer(cuda, trained ? trained.map((n) => byName.get(n)!) : params, t.optimizer, t.optimizer_impl);
    }
    let inputs: Tensor[] = [];
    let loss: Tensor | null = null;
    // At least the plan's steps, then on until the allocator's state repeats (Note [Steady state],
    // engine/train/steady-state.ts): from then on every step repeats an earlier one. Measured on the H100: peaks
    // can rise again after a step that did not raise them (ResNet-18 fp32 under 2 GiB at 87 runs out in step 5).
    const untilSteady = options.untilSteady ?? true;
    // Steps after the first run one program, except those GradScaler skips (no optimizer step).
    const firstRepeatable = Math.max(1, t.precision === 'amp_fp16' ? t.grad_scaler_skipped_steps : 0);
    const canRepeat = !(memoryLimitBytes !== undefined && allocator.config.garbageCollectionThreshold > 0);
    // Note [Replayed steps]: the step after the first repeatable one is recorded, later ones replay it.
    const recordedStep = (t.precision === 'amp_fp16' ? t.grad_scaler_skipped_steps : 0) + 2;
    let recorder: StepRecorder | null = null;
    // Note [Replayed second step]: the step before the recorded one is recorded to the end of its backward, and its
    // forward and backward replay as the recorded step's.
    let firstRecorder: StepRecorder | null = null;
    let secondStep: SecondStepProgram | null = null;
    let secondStepReplayed = false;
    let previousStepStartEvent = 0;
    const stateAfter = new SteadyStates();
    let repeated = false;
    // The steps past the plan's own stop at the work limit too: the plan was admitted for its own steps
    // (estimateWork), and a step costs about what the last one did.
    const maxEvents = options.maxEvents ?? LIMITS.events;
    let lastStepEvents = 0;
    const overBudget = () => cuda.events + lastStepEvents > maxEvents;
    const done = (step: number) => step > t.steps && (!untilSteady || step > kMaxSteps || repeated || overBudget());
    for (let step = 1; !done(step); step++) {
      cuda.step = step;
      const eventsBefore = cuda.events;
      allocator.stats.resetPeak();
      const result: StepResult = {
        step,
        peak_allocated_bytes: 0,
        peak_reserved_bytes: 0,
        after_forward_bytes: [],
        after_backward_bytes: [],
        after_optimizer_step_bytes: 0,
        after_zero_grad_bytes: 0,
        incomplete: true,
      };
      steps.push(result);
      if (program) {
        replaying = program;
        program.replay(cuda, result);
      } else if (recorded) {
        replaying = recorded;
        recorded.replayStep(step, cuda, result, replayed);
        if (step === recorded.recordedStep) program = recorded.programAfter(replayed);
      } else {
        // The recorded step's program did not come out (Note [Replayed steps]): after a replayed step, whose tensors
        // the model's code does not know, the plan is simulated again without replay.
        if (secondStepReplayed) throw new NotReplayable();
        runRecorder?.beginStep();
        if (replaySteps && step === recordedStep) {
          recorder = new StepRecorder(cuda);
          cuda.observer = runRecorder ? new BothRecorders(runRecorder, recorder) : recorder;
        } else if (replaySteps && step === recordedStep - 1) {
          firstRecorder = new StepRecorder(cuda);
          cuda.observer = runRecorder ? new BothRecorders(runRecorder, firstRecorder) : firstRecorder;
        }
        const stepStartEvent = cuda.events;
        if (secondStep) {
          // The step's forward and backward, replayed; its own code frees the previous step's inputs and loss.
          replaying = secondStep;
          secondStep.replay(cuda, scaler ? [...cuda.processStorages(), ...scaler.storages()] : cuda.processStorages(), {
            atCut(j) {
              cuda.phase = 'forward';
              if (j === 0) {
                for (let i = inputs.length - 1; i >= 0; i--) cuda.release(inputs[i]);
                inputs = [];
              } else {
                cuda.release(loss);
                loss = null;
                model.releaseGraph?.(rt);
              }
            },
            marked(j) {
              (j % 2 === 0 ? result.after_forward_bytes : result.after_backward_bytes).push(allocator.allocatedBytes);
              recorder?.mark();
              runRecorder?.mark();
            },
          });
          replaying = null;
          secondStep = null;
          secondStepReplayed = true;
        }
        for (let micro = 0; micro < t.grad_accumulation_steps && !secondStepReplayed; micro++) {
          cuda.phase = 'forward';
          const batch = model.makeInputs(rt, t.batch_size);
          if (micro === 0) firstRecorder?.cut();
          for (let i = inputs.length - 1; i >= 0; i--) cuda.release(inputs[i]); // the old tuple dies: last element first
          if (micro === 0) firstRecorder?.cut();
          inputs = batch;
          if (autocastDType) rt.autocast = new Autocast(autocastDType); // with torch.autocast(...): forward, loss, division
          const rawLoss = model.loss(rt, inputs);
          if (micro === 0) firstRecorder?.cut();
          cuda.release(loss); // `loss = ...` rebinds: the previous micro-step's loss dies
          model.releaseGraph?.(rt); // and the graph it held
          if (micro === 0) firstRecorder?.cut();
          loss = divScalar(rt, rawLoss, 'loss / grad_accumulation_steps');
          cuda.release(rawLoss);
          if (rt.autocast) {
            rt.autocast.exit(rt);
            rt.autocast = null;
          }
          result.after_forward_bytes.push(allocator.allocatedBytes);
          blocksWithoutGrad ??= autograd.reentrantBlocksWithoutGrad;
          recorder?.mark();
          runRecorder?.mark();
          firstRecorder?.mark();
          cuda.phase = 'backward';
          // (scaler.scale(loss) if scaler else loss).backward(): the scaled loss lives until the statement ends
          const root = scaler ? scaler.scale(rt, loss) : cuda.ref(loss);
          const rootGrad = cuda.empty(root.shape, root.dtype, 'ones_like(loss)');
          autograd.backward(root, rootGrad);
          cuda.release(rootGrad);
          cuda.release(root);
          result.after_backward_bytes.push(allocator.allocatedBytes);
          recorder?.mark();
          runRecorder?.mark();
          firstRecorder?.mark();
        }
        if (firstRecorder) {
          cuda.observer = runRecorder;
          secondStep = SecondStepProgram.prepare(firstRecorder, params, t.grad_accumulation_steps, cuda.convPlans.size);
          firstRecorder = null;
        }
        cuda.phase = 'optimizer';
        if (scaler) {
          // the first grad_scaler_skipped_steps steps overflowed (their data's business): GradScaler skips them
          scaler.step(rt, optimizer!, step <= t.grad_scaler_skipped_steps); // made unless the run is replayed
          scaler.update(rt);
        } else {
          optimizer!.step();
        }
        result.after_optimizer_step_bytes = allocator.allocatedBytes;
        recorder?.mark();
        runRecorder?.mark();
        cuda.phase = 'zero_grad';
        optimizer!.zeroGrad();
        result.after_zero_grad_bytes = allocator.allocatedBytes;
        recorder?.mark();
        runRecorder?.mark();
        if (recorder) {
          cuda.observer = null;
          // A convolution's workspaces depend on the allocator's state (cuDNN's plan fallback): not replayed.
          program = cuda.convPlans.size === 0 ? StepProgram.prepare(recorder, previousStepStartEvent, t.grad_accumulation_steps, cuda.phase) : null;
          if (program && runRecorder) keepRecordedRun(key!, new RecordedRun(runRecorder, recorder, program, step, 2 * t.grad_accumulation_steps + 2, blocksWithoutGrad ?? 0));
          recorder = null;
          runRecorder = null;
        }
        previousStepStartEvent = stepStartEvent;
      }
      result.peak_allocated_bytes = allocator.stats.allocated_bytes[0].peak;
      result.peak_reserved_bytes = allocator.stats.reserved_bytes[0].peak;
      result.incomplete = false;
      lastStepEvents = cuda.events - eventsBefore;
      if (untilSteady && canRepeat && step >= firstRepeatable) {
        repeated = stateAfter.repeats(allocatorState(allocator, deviceMemory, cuda.convPlans));
      }
    }
    if (untilSteady && !repeated) unsettled = { steps: steps.length, reason: !canRepeat ? 'garbage_collection' : steps.length >= kMaxSteps ? 'max_steps' : 'work_limit' };
  } catch (error) {
    if (error instanceof NotReplayable) return simulate(plan, { ...options, replaySteps: false });
    if (error instanceof BlocksNotReusable) return simulate(plan, { ...options, reuseBlocks: false });
    if (!(error instanceof OutOfMemoryError)) throw error;
    // Out of memory in a replayed step inside frames that free memory as they unwind (Note [Replayed steps]): the
    // replay cannot know those frees, the full simulation can.
    if (replaying && !replaying.oomAsFull) return simulate(plan, { ...options, replaySteps: false });
    oom = { message: error.message, step: cuda.step, phase: cuda.phase };
    // The failing step's peaks so far (its peak was reset when it began), not zeros.
    const failing = steps[steps.length - 1];
    if (failing?.incomplete) {
      failing.peak_allocated_bytes = allocator.stats.allocated_bytes[0].peak;
      failing.peak_reserved_bytes = allocator.stats.reserved_bytes[0].peak;
    }
  }
  const peakLive: LiveTensor[] = cuda.liveAtPeak().map((s) => ({ label: s.label, bytes: s.allocatedBytes, category: s.category }));
  const peakAt = { step: cuda.peak.step, phase: cuda.peak.phase };

  const peakAllocatedBytes = Math.max(0, ...steps.map((s) => s.peak_allocated_bytes), allocator.stats.allocated_bytes[0].peak);
  const peakReservedBytes = Math.max(0, ...steps.map((s) => s.peak_reserved_bytes), allocator.stats.reserved_bytes[0].peak);
  const breakdown: Breakdown = {
    parameter: 0,
    gradient: 0,
    optimizer_state: 0,
    activation: 0,
    temporary: 0,
    workspace: 0,
    input: 0,
    cached_free: 0,
  };
  for (const l of peakLive) breakdown[l.category] += l.bytes;
  breakdown.cached_free = Math.max(0, peakReservedBytes - peakAllocatedBytes);
  const cap = capBytes(plan, spec);
  const notes: Note[] = [{ id: 'parameters_loaded_in_training_dtype' }];
  const needed = oom && options.neededOnOom !== false ? neededMemory(plan, spec) : undefined;
  if (oom) notes.push({ id: 'stopped_at_oom', step: oom.step, phase: oom.phase });
  if (needed === null) notes.push({ id: 'needs_more_than_simulated', bytes: UNBOUNDED_MEMORY_BYTES });
  else if (unsettled) notes.push({ id: 'not_steady', ...unsettled });
  if (spec.id === 'custom' && memoryLimitBytes !== undefined) notes.push({ id: 'custom_gpu_from_cap', base_gpu: DEFAULT_GPU, memory_limit_bytes: memoryLimitBytes });
  if (blocksWithoutGrad) notes.push({ id: 'checkpoint_inputs_no_grad', blocks: blocksWithoutGrad });
  const unmatched = t.lora ? unmatchedTargets(model, t.lora.target_modules) : [];
  if (unmatched.length) notes.push({ id: 'lora_targets_unmatched', targets: unmatched });
  const unsaved = t.lora ? unmatchedModulesToSave(model, t.lora.modules_to_save) : [];
  if (unsaved.length) notes.push({ id: 'lora_modules_to_save_unmatched', modules: unsaved });
  const timelinePoints = options.timelinePoints ?? DEFAULT_TIMELINE_POINTS;
  return {
    schema_version: RESULT_SCHEMA_VERSION,
    kind: 'simulate',
    plan_name: plan.name,
    gpu: { id: spec.id ?? '', name: spec.name, total_memory_bytes: spec.total_memory_bytes, non_pytorch_bytes: outsideAllocatorBytes(spec), cap_bytes: cap },
    // the model's own size, from its parameter list: on an OOM while loading, only part of it reached the GPU
    model: modelSummary(model),
    fits: oom === null,
    peak_allocated_bytes: peakAllocatedBytes,
    peak_reserved_bytes: peakReservedBytes,
    // the handles of Note [Library handles] exist only from the first backward: never more than the GPU has
    nvidia_smi_bytes: Math.min(spec.total_memory_bytes, peakReservedBytes + outsideAllocatorBytes(spec)),
    headroom_bytes: cap - peakReservedBytes,
    peak_at: peakAt,
    steps,
    breakdown_at_peak: breakdown,
    largest_at_peak: peakLive.sort((a, b) => b.bytes - a.bytes).slice(0, 20),
    timeline: decimateTimeline(cuda.timeline(), timelinePoints),
    memory_stats: allocator.memoryStats(),
    memory_summary: memorySummary(allocator.stats),
    oom,
    needed_bytes: needed?.peak_reserved_bytes ?? null,
    notes,
    caveats: caveatsFor(plan, spec, { convWorkspacesEstimated: cuda.convWorkspacesEstimated }),
  };
}
