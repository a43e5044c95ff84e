/**
 * The largest micro-batch that fits a GPU, found as users find it on a real one (grow, then bisect), but on the
 * simulator: a batch fits when every simulated step completes without PyTorch's out-of-memory error under the
 * allocator's cap, the release-and-retry path included. The cap is the plan's `gpu.memory_limit_bytes` (what
 * set_per_process_memory_fraction imposes) or else the device's memory less what the CUDA context holds.
 *
 * The search is a generator of trials (`searchMaxBatch`): a host reports each trial as it finishes and stops the
 * search between trials by not asking for the next one. `findMaxBatch` runs it to the end.
 */
import { capBytes, type DeviceSpec } from '../gpu/device.ts';
import type { Plan } from '../plan/schema.ts';
import type { MaxBatchResult, Recommendation, Trial } from '../result/max-batch.ts';
import { RESULT_SCHEMA_VERSION } from '../result/version.ts';
import { simulate } from '../train/simulate.ts';

export { capBytes };

export interface MaxBatchOptions {
  device: DeviceSpec;
  /** Fraction of the cap kept free in the recommendation (default 0.05). */
  safetyMargin?: number;
  /** Round the recommendation down to a multiple of this (default 1), where the batch allows. */
  multipleOf?: number;
  /** Largest batch tried (default 1 << 26). */
  maxBatch?: number;
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

/** Searches the largest batch, yielding each trial as it finishes; returns the result. */
export function* searchMaxBatch(plan: Plan, options: MaxBatchOptions): Generator<Trial, MaxBatchResult, void> {
  const margin = options.safetyMargin ?? DEFAULT_SAFETY_MARGIN;
  const multipleOf = Math.max(1, Math.floor(options.multipleOf ?? 1));
  const upper = options.maxBatch ?? 1 << 26;
  const cap = capBytes(plan, options.device);
  const trials: Trial[] = [];
  const byBatch = new Map<number, Trial>();
  const run = (batch: number): Trial => {
    const r = simulate(
      { ...plan, training: { ...plan.training, batch_size: batch } },
      { device: options.device, timelinePoints: 0, peakDetails: false, untilSteady: options.untilSteady },
    );
    const trial: Trial = { index: trials.length + 1, batch, fits: r.oom === null, peak_allocated_bytes: r.peak_allocated_bytes, peak_reserved_bytes: r.peak_reserved_bytes, oom: r.oom };
    trials.push(trial);
    byBatch.set(batch, trial);
    return trial;
  };
  // Grow by doubling until a batch fails, then bisect between the last fit and the first failure.
  let good = 0;
  let bad = 0;
  for (let b = 1; b <= upper; b *= 2) {
    const t = run(b);
    yield t;
    if (t.fits) good = b;
    else {
      bad = b;
      break;
    }
  }
  if (bad === 0) bad = upper + 1;
  while (bad - good > 1) {
    const mid = Math.floor((good + bad) / 2);
    const t = run(mid);
    yield t;
    if (t.fits) good = mid;
    else bad = mid;
  }
  // The recommendation: the largest tried batch that fits with the margin to spare, refined by bisection.
  const budget = (1 - margin) * cap;
  let recommended = 0;
  for (const t of trials) if (t.fits && t.peak_reserved_bytes <= budget && t.batch > recommended) recommended = t.batch;
  let lo = recommended;
  let hi = good + 1;
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    let t = byBatch.get(mid);
    if (!t) yield (t = run(mid));
    if (t.fits && t.peak_reserved_bytes <= budget) lo = mid;
    else hi = mid;
  }
  recommended = lo;
  // Never recommend nothing when something fits: the largest batch that fits, with the room it leaves said.
  let reason: Recommendation['reason_id'] = good === 0 ? 'nothing_fits' : recommended > 0 ? 'keeps_margin' : 'margin_not_kept';
  if (reason === 'margin_not_kept') recommended = good;
  if (multipleOf > 1 && recommended >= multipleOf && recommended % multipleOf !== 0) {
    recommended -= recommended % multipleOf;
    if (!byBatch.has(recommended)) yield run(recommended);
    if (!byBatch.get(recommended)!.fits) reason = 'margin_not_kept';
  }
  const recommendedTrial = byBatch.get(recommended);
  // What limits the batch: the largest batch that fits, simulated once more with what is live at its peak.
  const best = good > 0 ? simulate({ ...plan, training: { ...plan.training, batch_size: good } }, { device: options.device, timelinePoints: 0, untilSteady: options.untilSteady }) : null;
  return {
    schema_version: RESULT_SCHEMA_VERSION,
    kind: 'max_batch',
    plan_name: plan.name,
    gpu: { id: options.device.id ?? '', name: options.device.name, total_memory_bytes: options.device.total_memory_bytes, non_pytorch_bytes: options.device.non_pytorch_bytes, cap_bytes: cap },
    cap_bytes: cap,
    max_batch: good,
    grad_accumulation_steps: plan.training.grad_accumulation_steps,
    effective_batch: good * plan.training.grad_accumulation_steps,
    recommendation: {
      batch: recommended,
      reason_id: reason,
      safety_margin: margin,
      margin_bytes: Math.ceil(margin * cap),
      headroom_bytes: recommendedTrial && recommended > 0 ? cap - recommendedTrial.peak_reserved_bytes : 0,
      multiple_of: multipleOf,
    },
    trials,
    reached_upper_bound: good === upper,
    limited_by: best ? { step: best.peak_at.step, phase: best.peak_at.phase, largest: best.largest_at_peak.slice(0, 5) } : null,
  };
}

/** The whole search at once (the CLI, tests); `onTrial` hears each trial as it finishes. */
export function findMaxBatch(plan: Plan, options: MaxBatchOptions & { onTrial?: (trial: Trial) => void }): MaxBatchResult {
  const search = searchMaxBatch(plan, options);
  for (;;) {
    const next = search.next();
    if (next.done) return next.value;
    options.onTrial?.(next.value);
  }
}
