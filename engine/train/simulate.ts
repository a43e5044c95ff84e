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
import { memorySummary } from '../allocator/format.ts';
import { InputError } from '../errors.ts';
import { layerListModel } from '../models/layer-list.ts';
import { resolveHfConfig } from '../models/hf/config.ts';
import { hfModel } from '../models/hf/index.ts';
import { torchvisionModel } from '../models/torchvision.ts';
import { PRESETS } from '../models/presets.ts';
import type { ConvWorkspaceTable } from '../ops/conv.ts';
import type { TrainableModel } from '../models/model.ts';
import { Autocast } from '../ops/autocast.ts';
import { divScalar } from '../ops/pointwise.ts';
import type { Runtime } from '../ops/runtime.ts';
import type { Plan } from '../plan/schema.ts';
import { CudaDevice, type TimelinePoint } from '../tensor/cuda.ts';
import type { DType } from '../tensor/dtype.ts';
import type { MemoryCategory, Storage, Tensor } from '../tensor/tensor.ts';
import { Optimizer } from './optimizer.ts';
import { GradScaler } from './grad-scaler.ts';
import type { GpuSpec } from '../gpu/catalog.ts';

/** The GPU a simulation runs on: an entry of the GPU catalog (resources/gpus.json), which the edges load. */
export type DeviceSpec = Pick<
  GpuSpec,
  'name' | 'total_memory_bytes' | 'non_pytorch_bytes' | 'cublas_workspace_bytes' | 'multi_processor_count' | 'max_threads_per_multi_processor' | 'compute_capability' | 'vendor'
> & {
  /** cuDNN convolution workspaces measured on this GPU (or the closest measured one); null: the fallback pattern. */
  convWorkspaces?: ConvWorkspaceTable | null;
};

/** cuBLASLt's workspace (`CUBLASLT_WORKSPACE_SIZE`, 1024 KiB by default), measured separate from cuBLAS's on the H100. */
const kCublasLtWorkspaceBytes = 1_048_576;

/** Steps simulated at most while waiting for the peak reserved to stop rising. */
const kMaxSteps = 20;

export interface StepResult {
  step: number;
  peakAllocatedBytes: number;
  peakReservedBytes: number;
  afterForwardBytes: number[];
  afterBackwardBytes: number[];
  afterOptimizerStepBytes: number;
  afterZeroGradBytes: number;
}

export interface LiveTensor {
  label: string;
  bytes: number;
  category: MemoryCategory;
}

export interface SimulationResult {
  peakAllocatedBytes: number;
  peakReservedBytes: number;
  /** What nvidia-smi would show at the peak: reserved plus the memory outside the allocator. */
  nvidiaSmiBytes: number;
  steps: StepResult[];
  /** Allocated bytes at the peak by what they hold, plus what reserved holds beyond them. */
  breakdownAtPeak: Record<MemoryCategory | 'cached_free', number>;
  /** The largest tensors alive at the peak. */
  largestAtPeak: LiveTensor[];
  /** Where the peak happened. */
  peakAt: { step: number; phase: string };
  timeline: TimelinePoint[];
  memoryStats: Record<string, number>;
  memorySummary: string;
  oom: { message: string; step: number; phase: string } | null;
  parameterBytes: number;
  parameterCount: number;
  notes: string[];
}

const PARAM_DTYPE: Record<Plan['training']['precision'], DType> = {
  fp32: 'float32',
  amp_fp16: 'float32',
  amp_bf16: 'float32',
  bf16: 'bfloat16',
  fp16: 'float16',
};

function buildModel(plan: Plan, device: DeviceSpec): TrainableModel {
  const m = plan.model;
  const t = plan.training;
  const dtype = PARAM_DTYPE[t.precision];
  const checkpointing = t.activation_checkpointing;
  const attentionDevice = { computeCapability: device.compute_capability, vendor: device.vendor };
  const workspaces = device.convWorkspaces ?? null;
  if ('layers' in m && 'input_features' in m) return layerListModel(m.layers, [m.input_features], dtype, checkpointing, attentionDevice, workspaces);
  if ('layers' in m) return layerListModel(m.layers, m.input_shape, dtype, checkpointing, attentionDevice, workspaces);
  const hfOptions = { dtype, seqLen: t.seq_len, attention: t.attention, checkpointing, device: attentionDevice };
  const visionOptions = (numClasses: number) => ({ dtype, imageSize: t.image_size, numClasses, checkpointing, convWorkspaces: device.convWorkspaces ?? null, device: attentionDevice });
  if ('preset' in m) {
    const preset = PRESETS[m.preset]!;
    if (preset.kind === 'hf') return hfModel(resolveHfConfig(preset.config), hfOptions);
    return torchvisionModel(preset.name, visionOptions(m.num_classes ?? 1000));
  }
  if ('hf_config' in m) return hfModel(resolveHfConfig(m.hf_config), hfOptions);
  return torchvisionModel(m.torchvision, visionOptions(m.num_classes));
}


export interface SimulateOptions {
  /** The GPU (the plan's gpu.name resolved by the caller, or the default GPU). */
  device: DeviceSpec;
  /** Keep at most this many timeline points (default 4000; 0 records none). */
  timelinePoints?: number;
  /**
   * Capture what is live at the peak (the breakdown, the largest tensors; default true). A search's trials only
   * need the peaks.
   */
  peakDetails?: boolean;
  /** Every allocator trace entry, as a PyTorch memory snapshot would record it. */
  onTrace?: TraceListener;
  /**
   * Run on past the plan's steps until the peak reserved stops rising (default true). False runs exactly
   * `training.steps`, as a recording of that many steps did.
   */
  untilSteady?: boolean;
}

export function simulate(plan: Plan, options: SimulateOptions): SimulationResult {
  const t = plan.training;
  const spec = options.device;
  const memoryLimitBytes = plan.gpu && 'memory_limit_bytes' in plan.gpu ? plan.gpu.memory_limit_bytes : undefined;
  const allocator = new CachingAllocator({
    config: parseAllocatorConf(plan.allocator.conf, 'allocator.conf'),
    device: new SimulatedDevice(spec.total_memory_bytes - spec.non_pytorch_bytes),
    totalGlobalMemBytes: spec.total_memory_bytes,
    memoryLimitBytes,
    nonPyTorchBytes: spec.non_pytorch_bytes,
    onTrace: options.onTrace,
  });
  const cuda = new CudaDevice(
    allocator,
    { cublasBytes: spec.cublas_workspace_bytes, cublasLtBytes: kCublasLtWorkspaceBytes },
    { multiProcessorCount: spec.multi_processor_count, maxThreadsPerMultiProcessor: spec.max_threads_per_multi_processor },
  );
  const autograd = new Autograd(cuda);
  const rt: Runtime = { cuda, autograd, autocast: null };
  const autocastDType = t.precision === 'amp_bf16' ? 'bfloat16' : t.precision === 'amp_fp16' ? 'float16' : null;
  const scaler = t.precision === 'amp_fp16' ? new GradScaler() : null;
  const model = buildModel(plan, spec);

  cuda.recordTimeline = options.timelinePoints !== 0;
  cuda.recordStorages = options.peakDetails !== false;

  const steps: StepResult[] = [];
  let oom: SimulationResult['oom'] = null;
  const params: Parameter[] = [];
  let optimizer: Optimizer | null = null;
  try {
    cuda.phase = 'load';
    for (const p of model.parameters) {
      const tensor = cuda.empty(p.shape, p.dtype, p.name, 'parameter'); // buffers count with the parameters
      if (!p.buffer) params.push(new Parameter(p.name, tensor, cuda));
      model.tensors.set(p.name, tensor);
    }
    const order = model.optimizerOrder;
    const byName = new Map(params.map((p) => [p.name, p]));
    optimizer = new Optimizer(cuda, order ? order.map((n) => byName.get(n)!) : params, t.optimizer, t.optimizer_impl);
    let inputs: Tensor[] = [];
    let loss: Tensor | null = null;
    // At least the plan's steps, then on until the peak reserved stops rising (steady state): optimizer state
    // appears in step 1 and fragmentation can grow for a few steps after. Measured on the H100: the AMP bf16 MLP
    // at batch 6528 under a 3 GiB cap fits for 3 steps and runs out of memory in step 4, as this predicts
    // (test/fixtures/boundary/*_6steps.json).
    const untilSteady = options.untilSteady ?? true;
    const done = (step: number) =>
      step > t.steps &&
      (!untilSteady || step > kMaxSteps || steps[steps.length - 1]!.peakReservedBytes <= steps[steps.length - 2]!.peakReservedBytes);
    for (let step = 1; !done(step); step++) {
      cuda.step = step;
      allocator.stats.resetPeak();
      const result: StepResult = {
        step,
        peakAllocatedBytes: 0,
        peakReservedBytes: 0,
        afterForwardBytes: [],
        afterBackwardBytes: [],
        afterOptimizerStepBytes: 0,
        afterZeroGradBytes: 0,
      };
      steps.push(result);
      for (let micro = 0; micro < t.grad_accumulation_steps; micro++) {
        cuda.phase = 'forward';
        const batch = model.makeInputs(rt, t.batch_size);
        for (let i = inputs.length - 1; i >= 0; i--) cuda.release(inputs[i]); // the old tuple dies: last element first
        inputs = batch;
        if (autocastDType) rt.autocast = new Autocast(autocastDType); // with torch.autocast(...): forward, loss, division
        const rawLoss = model.loss(rt, inputs);
        cuda.release(loss); // `loss = ...` rebinds: the previous micro-step's loss dies
        loss = divScalar(rt, rawLoss, 'loss / grad_accumulation_steps');
        cuda.release(rawLoss);
        if (rt.autocast) {
          rt.autocast.exit(rt);
          rt.autocast = null;
        }
        result.afterForwardBytes.push(allocator.allocatedBytes);
        cuda.phase = 'backward';
        // (scaler.scale(loss) if scaler else loss).backward(): the scaled loss lives until the statement ends
        const root = scaler ? scaler.scale(rt, loss) : cuda.ref(loss);
        const rootGrad = cuda.empty(root.shape, root.dtype, 'ones_like(loss)');
        autograd.backward(root, rootGrad);
        cuda.release(rootGrad);
        cuda.release(root);
        result.afterBackwardBytes.push(allocator.allocatedBytes);
      }
      cuda.phase = 'optimizer';
      if (scaler) {
        // the first grad_scaler_skipped_steps steps overflowed (their data's business): GradScaler skips them
        scaler.step(rt, optimizer, step <= t.grad_scaler_skipped_steps);
        scaler.update(rt);
      } else {
        optimizer.step();
      }
      result.afterOptimizerStepBytes = allocator.allocatedBytes;
      cuda.phase = 'zero_grad';
      optimizer.zeroGrad();
      result.afterZeroGradBytes = allocator.allocatedBytes;
      result.peakAllocatedBytes = allocator.stats.allocated_bytes[0].peak;
      result.peakReservedBytes = allocator.stats.reserved_bytes[0].peak;
    }
  } catch (error) {
    if (!(error instanceof OutOfMemoryError)) throw error;
    oom = { message: error.message, step: cuda.step, phase: cuda.phase };
  }
  const peakLive: LiveTensor[] = cuda.liveAtPeak().map((s) => ({ label: s.label, bytes: s.allocatedBytes, category: s.category }));
  const peakAt = { step: cuda.peak.step, phase: cuda.peak.phase };

  const peakAllocatedBytes = Math.max(0, ...steps.map((s) => s.peakAllocatedBytes), allocator.stats.allocated_bytes[0].peak);
  const peakReservedBytes = Math.max(0, ...steps.map((s) => s.peakReservedBytes), allocator.stats.reserved_bytes[0].peak);
  const breakdown: SimulationResult['breakdownAtPeak'] = {
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
  const parameterBytes = params.reduce((n, p) => n + p.tensor.nbytes, 0);
  return {
    peakAllocatedBytes,
    peakReservedBytes,
    nvidiaSmiBytes: peakReservedBytes + spec.non_pytorch_bytes,
    steps,
    breakdownAtPeak: breakdown,
    largestAtPeak: peakLive.sort((a, b) => b.bytes - a.bytes).slice(0, 20),
    peakAt,
    timeline: cuda.timeline(options.timelinePoints ?? 4000),
    memoryStats: allocator.memoryStats(),
    memorySummary: memorySummary(allocator.stats),
    oom,
    parameterBytes,
    parameterCount: params.reduce((n, p) => n + p.tensor.numel, 0),
    notes: [
      'Parameters are created in their training dtype and moved to the GPU one by one in module order, as from_pretrained(..., dtype=...) followed by .to("cuda") does. Building a model in fp32 on the GPU and casting it afterwards leaves freed blocks cached and reserves more.',
    ],
  };
}
