/**
 * The largest micro-batch that fits a GPU, found as users find it on a real one (grow, then bisect), but on the
 * simulator: a batch fits when every simulated step completes without PyTorch's out-of-memory error under the
 * allocator's cap, the release-and-retry path included. The cap is the plan's `gpu.memory_limit_bytes` (what
 * set_per_process_memory_fraction imposes) or else the device's memory less what the CUDA context holds.
 */
import type { Plan } from '../plan/schema.ts';
import { simulate, type DeviceSpec, type LiveTensor, type SimulationResult } from '../train/simulate.ts';

export interface Trial {
  batch: number;
  fits: boolean;
  peakAllocatedBytes: number;
  peakReservedBytes: number;
  /** Where the OOM happened, for a batch that does not fit. */
  oom: SimulationResult['oom'];
}

export interface MaxBatchResult {
  /** Largest micro-batch that fits (0 when none does). */
  maxBatch: number;
  /** maxBatch × grad_accumulation_steps. */
  effectiveBatch: number;
  /** Largest batch whose peak reserved stays under (1 - safetyMargin) × cap. */
  recommendedBatch: number;
  safetyMargin: number;
  capBytes: number;
  /** Every trial in the order it ran. */
  trials: Trial[];
  /** The search stopped at its upper bound: the batch could be larger still. */
  reachedUpperBound: boolean;
  /** What fills memory at the peak of the largest fitting batch. */
  limitedBy: { step: number; phase: string; largest: LiveTensor[] } | null;
}

export interface MaxBatchOptions {
  device: DeviceSpec;
  /** Fraction of the cap kept free in the recommendation (default 0.05). */
  safetyMargin?: number;
  /** Largest batch tried (default 1 << 26). */
  maxBatch?: number;
  /** Called after each trial (progress for a UI). */
  onTrial?: (trial: Trial) => void;
  /** A batch fits when every step to steady state runs (default true); false: the plan's steps only. */
  untilSteady?: boolean;
}

/**
 * The recommendation keeps 5% of the cap free. Measured: near the limit "fits" is not monotonic (the AMP bf16 MLP
 * under a 3 GiB cap fits at 6272, runs out at 6273 and fits again at 6528, all in fresh processes on the H100:
 * test/fixtures/boundary), a band about 4% wide; 5% keeps the recommendation clear of it, and leaves room for what
 * a plan does not describe (other processes, NCCL, cuDNN autotuning).
 */
export const DEFAULT_SAFETY_MARGIN = 0.05;

export function capBytes(plan: Plan, device: DeviceSpec): number {
  if (plan.gpu && 'memory_limit_bytes' in plan.gpu) return plan.gpu.memory_limit_bytes;
  return device.total_memory_bytes - device.non_pytorch_bytes;
}

export function findMaxBatch(plan: Plan, options: MaxBatchOptions): MaxBatchResult {
  const margin = options.safetyMargin ?? DEFAULT_SAFETY_MARGIN;
  const upper = options.maxBatch ?? 1 << 26;
  const cap = capBytes(plan, options.device);
  const trials: Trial[] = [];
  const results = new Map<number, SimulationResult>();
  const run = (batch: number): boolean => {
    const r = simulate(
      { ...plan, training: { ...plan.training, batch_size: batch } },
      { device: options.device, timelinePoints: 0, peakDetails: false, untilSteady: options.untilSteady },
    );
    results.set(batch, r);
    const trial: Trial = { batch, fits: r.oom === null, peakAllocatedBytes: r.peakAllocatedBytes, peakReservedBytes: r.peakReservedBytes, oom: r.oom };
    trials.push(trial);
    options.onTrial?.(trial);
    return trial.fits;
  };
  // Grow by doubling until a batch fails, then bisect between the last fit and the first failure.
  let good = 0;
  let bad = 0;
  for (let b = 1; b <= upper; b *= 2) {
    if (run(b)) good = b;
    else {
      bad = b;
      break;
    }
  }
  if (bad === 0) bad = upper + 1;
  while (bad - good > 1) {
    const mid = Math.floor((good + bad) / 2);
    if (run(mid)) good = mid;
    else bad = mid;
  }
  // The recommendation: the largest tried batch that fits with the margin to spare, refined by bisection.
  const budget = (1 - margin) * cap;
  let recommended = 0;
  for (const t of trials) if (t.fits && t.peakReservedBytes <= budget && t.batch > recommended) recommended = t.batch;
  let lo = recommended;
  let hi = good + 1;
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (!results.has(mid)) run(mid);
    const r = results.get(mid)!;
    if (r.oom === null && r.peakReservedBytes <= budget) lo = mid;
    else hi = mid;
  }
  recommended = lo;
  // What limits the batch: the largest batch that fits, simulated once more with what is live at its peak.
  const best = good > 0 ? simulate({ ...plan, training: { ...plan.training, batch_size: good } }, { device: options.device, timelinePoints: 0, untilSteady: options.untilSteady }) : null;
  return {
    maxBatch: good,
    effectiveBatch: good * plan.training.grad_accumulation_steps,
    reachedUpperBound: good === upper,
    recommendedBatch: recommended,
    safetyMargin: margin,
    capBytes: cap,
    trials,
    limitedBy: best ? { step: best.peakAt.step, phase: best.peakAt.phase, largest: best.largestAtPeak.slice(0, 5) } : null,
  };
}
