/** The result of simulating a plan's training steps (engine/train/simulate.ts `simulate`). */
import { z } from 'zod';
import { noteSchema } from './advice.ts';
import { caveatsSchema } from './caveats.ts';
import { bytes, count, liveTensorSchema, oomSchema, schemaVersion } from './common.ts';
import { timelineSchema } from './timeline.ts';

/** One optimizer step: its peaks (reset at its start, as `reset_peak_memory_stats()` would) and allocated at its marks. */
export const stepResultSchema = z.object({
  step: count,
  peak_allocated_bytes: bytes,
  peak_reserved_bytes: bytes,
  /** Allocated after each micro-step's forward (and loss). */
  after_forward_bytes: z.array(bytes),
  /** Allocated after each micro-step's backward. */
  after_backward_bytes: z.array(bytes),
  after_optimizer_step_bytes: bytes,
  after_zero_grad_bytes: bytes,
  /** The step did not finish: PyTorch's out-of-memory error was raised in it (its peaks are those reached before). */
  incomplete: z.boolean(),
});

/** Allocated bytes at the peak by what they hold, plus what reserved holds beyond them (`cached_free`). */
export const breakdownSchema = z.object({
  parameter: bytes,
  gradient: bytes,
  optimizer_state: bytes,
  activation: bytes,
  temporary: bytes,
  workspace: bytes,
  input: bytes,
  cached_free: bytes,
});

/** The GPU simulated and the memory PyTorch may use on it. */
export const gpuUsedSchema = z.object({
  /** The catalog id (`custom` for a cap larger than the GPU). */
  id: z.string(),
  /** What torch.cuda.get_device_name() prints. */
  name: z.string(),
  total_memory_bytes: bytes,
  /** Memory a training process holds outside the caching allocator (CUDA context, kernels, both threads' library handles). */
  non_pytorch_bytes: bytes,
  /** What the allocator may reserve: the plan's memory_limit_bytes, else total less non-PyTorch memory. */
  cap_bytes: bytes,
});

/**
 * The parameters that train where not all of them do (LoRA, frozen parameters): what the answer shows beside the
 * parameter count. null where everything trains, or for a result stored before memplan counted it.
 */
export function partlyTrainable(model: { parameter_count: number; trainable_parameter_count?: number | undefined }): number | null {
  const t = model.trainable_parameter_count;
  return t === undefined || t === model.parameter_count ? null : t;
}

/** The model as the plan describes it: its own size, whatever happened in the simulation. */
export const modelSummarySchema = z.object({
  parameter_count: count,
  /**
   * The parameters that require grad: all of them in a full fine-tune; with LoRA and frozen parameters what
   * PEFT's `print_trainable_parameters()` counts as trainable (the adapters and the heads a task keeps whole).
   * Absent from results stored before it existed.
   */
  trainable_parameter_count: count.optional(),
  parameter_bytes: bytes,
  /** Buffers moved to the GPU with the parameters (BatchNorm statistics), not trained. */
  buffer_bytes: bytes,
});

export const simulateResultSchema = z.object({
  schema_version: schemaVersion,
  kind: z.literal('simulate'),
  plan_name: z.string(),
  gpu: gpuUsedSchema,
  model: modelSummarySchema,
  /** Every step ran without PyTorch's out-of-memory error. */
  fits: z.boolean(),
  /** torch.cuda.max_memory_allocated(). */
  peak_allocated_bytes: bytes,
  /** torch.cuda.max_memory_reserved(). */
  peak_reserved_bytes: bytes,
  /** What nvidia-smi would show at the peak: reserved plus the memory outside the allocator. */
  nvidia_smi_bytes: bytes,
  /** cap_bytes less the peak reserved (negative: does not fit). */
  headroom_bytes: z.number().int(),
  peak_at: z.object({ step: count, phase: z.string() }),
  steps: z.array(stepResultSchema),
  breakdown_at_peak: breakdownSchema,
  /** The largest tensors alive at the peak (at most 20). */
  largest_at_peak: z.array(liveTensorSchema),
  timeline: timelineSchema,
  /** torch.cuda.memory_stats() at the end. */
  memory_stats: z.record(z.string(), z.number()),
  /** torch.cuda.memory_summary() at the end. */
  memory_summary: z.string(),
  oom: oomSchema.nullable(),
  /**
   * When it runs out of memory: the peak reserved the plan reaches on this GPU with no cap and unbounded memory
   * (what it needs); null when it fits. Absent in results stored before memplan reported it.
   */
  needed_bytes: bytes.nullable().default(null),
  notes: z.array(noteSchema),
  /** What the answer assumes and how sure memplan is (caveats.ts); absent in results stored before memplan reported them. */
  caveats: caveatsSchema.nullable().default(null),
});

export type StepResult = z.output<typeof stepResultSchema>;
export type Breakdown = z.output<typeof breakdownSchema>;
export type GpuUsed = z.output<typeof gpuUsedSchema>;
export type SimulateResult = z.output<typeof simulateResultSchema>;
