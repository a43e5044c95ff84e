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
import type { MaxBatchResult, Needed, Recommendation, Trial, UnstableRegion } from '../result/max-batch.ts';
import { RESULT_SCHEMA_VERSION } from '../result/version.ts';
import { caveatsFor } from '../result/caveats.ts';
import { neededMemory, simulate } from '../train/simulate.ts';

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
  /** The catalog's GPUs: when nothing fits, which of them batch 1 fits on (`needed.fits_on`). */
  catalog?: readonly DeviceSpec[];
}

/** Batches above a fitting one that must run out before it is the answer (as the boundary suite verifies it). */
const kVerifyAbove = 3;

/**
 * The recommendation keeps 5% of the cap free. Measured: near the limit "fits" is not monotonic (the AMP bf16 MLP
 * under a 3 GiB cap fits at 6272, runs out at 6273 and fits again at 6528, all in fresh processes on the H100:
 * test/fixtures/boundary), a band about 4% wide; 5% keeps the recommendation clear of it, and leaves room for what
 * a plan does not describe (other processes, NCCL, cuDNN autotuning).
 */
export const DEFAULT_SAFETY_MARGIN = 0.05;

/** The trials of a search so far, by batch, and how to run one more. */
interface Trials {
  readonly trials: Trial[];
  readonly byBatch: Map<number, Trial>;
  run(batch: number): Trial;
}

function trialsOf(plan: Plan, options: MaxBatchOptions): Trials {
  const trials: Trial[] = [];
  const byBatch = new Map<number, Trial>();
  const run = (batch: number): Trial => {
    const r = simulate(
      { ...plan, training: { ...plan.training, batch_size: batch } },
      { device: options.device, timelinePoints: 0, peakDetails: false, untilSteady: options.untilSteady, neededOnOom: false },
    );
    const trial: Trial = { index: trials.length + 1, batch, fits: r.oom === null, peak_allocated_bytes: r.peak_allocated_bytes, peak_reserved_bytes: r.peak_reserved_bytes, oom: r.oom };
    trials.push(trial);
    byBatch.set(batch, trial);
    return trial;
  };
  return { trials, byBatch, run };
}

/**
 * The largest batch that fits (0: none), found as the whole search finds it (`searchMaxBatch` goes on from here
 * to the recommendation); yields each trial.
 */
function* searchLargest(options: MaxBatchOptions, { byBatch, run }: Trials): Generator<Trial, number, void> {
  const upper = options.maxBatch ?? 1 << 26;
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
  const bisect = function* (lo: number, hi: number): Generator<Trial, number, void> {
    while (hi - lo > 1) {
      const mid = Math.floor((lo + hi) / 2);
      let t = byBatch.get(mid);
      if (!t) yield (t = run(mid));
      if (t.fits) lo = mid;
      else hi = mid;
    }
    return lo;
  };
  good = yield* bisect(good, bad);
  // Near the limit fit is not monotonic: the answer is a batch whose next kVerifyAbove batches run out, the rule the
  // boundary suite's fresh-process searches follow (resources/measure/boundary_trials.py). Past a fitting one, grow
  // by doubling and bisect again.
  for (;;) {
    let above = 0;
    for (let b = good + 1; b <= Math.min(good + kVerifyAbove, upper); b++) {
      let t = byBatch.get(b);
      if (!t) yield (t = run(b));
      if (t.fits) above = b;
    }
    if (above === 0) break;
    let lo = above;
    let step = kVerifyAbove + 1;
    for (;;) {
      const b = lo + step;
      if (b > upper) break;
      let t = byBatch.get(b);
      if (!t) yield (t = run(b));
      if (!t.fits) break;
      lo = b;
      step *= 2;
    }
    good = yield* bisect(lo, Math.min(lo + step, upper + 1));
  }
  return good;
}

/**
 * The largest batch that fits a variant of a plan (advice: engine/search/advice.ts), with the trials that found it:
 * the search's answer, without the recommendation, what limits the batch or what a plan that does not fit needs.
 */
export function largestBatch(plan: Plan, options: MaxBatchOptions): { max_batch: number; trials: Trial[] } {
  const search = trialsOf(plan, options);
  const largest = searchLargest(options, search);
  for (;;) {
    const next = largest.next();
    if (next.done) return { max_batch: next.value, trials: search.trials };
  }
}

/** Searches the largest batch, yielding each trial as it finishes; returns the result. */
export function* searchMaxBatch(plan: Plan, options: MaxBatchOptions): Generator<Trial, MaxBatchResult, void> {
  const margin = options.safetyMargin ?? DEFAULT_SAFETY_MARGIN;
  const multipleOf = Math.max(1, Math.floor(options.multipleOf ?? 1));
  const upper = options.maxBatch ?? 1 << 26;
  const cap = capBytes(plan, options.device);
  const search = trialsOf(plan, options);
  const { trials, byBatch, run } = search;
  const good = yield* searchLargest(options, search);
  const failingBelow = trials.filter((t) => !t.fits && t.batch < good).map((t) => t.batch).sort((a, b) => a - b);
  const unstable: UnstableRegion | null = failingBelow.length
    ? {
        from_batch: failingBelow[0]!,
        to_batch: good,
        failing_batches: failingBelow,
        fitting_batches: trials.filter((t) => t.fits && t.batch > failingBelow[0]! && t.batch <= good).map((t) => t.batch).sort((a, b) => a - b),
      }
    : null;
  // The recommendation: the largest tried batch that fits with the margin to spare, below any failing batch,
  // refined by bisection.
  const stableBelow = unstable ? unstable.from_batch : good + 1;
  const budget = (1 - margin) * cap;
  const keepsMargin = (t: Trial) => t.fits && t.peak_reserved_bytes <= budget;
  let recommended = 0;
  for (const t of trials) if (keepsMargin(t) && t.batch < stableBelow && t.batch > recommended) recommended = t.batch;
  let lo = recommended;
  let hi = stableBelow;
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    let t = byBatch.get(mid);
    if (!t) yield (t = run(mid));
    if (keepsMargin(t)) lo = mid;
    else hi = mid;
  }
  recommended = lo;
  // Never recommend nothing when something fits: the largest batch that fits below the unstable region, with the
  // room it leaves said.
  let reason: Recommendation['reason_id'] = good === 0 ? 'nothing_fits' : recommended > 0 ? 'keeps_margin' : 'margin_not_kept';
  if (reason === 'margin_not_kept') recommended = Math.max(0, ...trials.filter((t) => t.fits && t.batch < stableBelow).map((t) => t.batch));
  if (multipleOf > 1 && recommended >= multipleOf && recommended % multipleOf !== 0) {
    recommended -= recommended % multipleOf;
    if (!byBatch.has(recommended)) yield run(recommended);
    if (!byBatch.get(recommended)!.fits) reason = 'margin_not_kept';
  }
  // A recommendation whose neighbours also fit: one batch less, and one more unless it is the largest, must not
  // run out (a batch next to a failing one sits where fit is not monotonic). Step below a failing neighbour; each
  // step lowers the batch.
  for (;;) {
    if (recommended <= 1) break;
    let failing = 0;
    for (const b of recommended < good ? [recommended - 1, recommended + 1] : [recommended - 1]) {
      let t = byBatch.get(b);
      if (!t) yield (t = run(b));
      if (!t.fits) failing = failing === 0 ? b : Math.min(failing, b);
    }
    if (failing === 0) break;
    const below = trials.filter((t) => t.fits && t.batch < Math.min(failing, recommended) - 1).map((t) => t.batch);
    recommended = below.length ? Math.max(...below) : Math.max(1, Math.min(failing, recommended) - 2);
    if (!byBatch.has(recommended)) yield run(recommended);
    if (!byBatch.get(recommended)!.fits) {
      recommended = 0;
      break;
    }
  }
  if (recommended === 0 && good > 0) recommended = good;
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
    unstable_region: unstable,
    needed: good === 0 ? needed(plan, options) : null,
    caveats: caveatsFor(plan, options.device),
  };
}

/**
 * What a plan that does not fit at batch 1 needs: batch 1 on the plan's GPU with no cap and unbounded memory, and
 * the catalog GPUs where batch 1 fits (each simulated on its own: attention backends and workspaces differ by GPU).
 * A GPU with less memory for PyTorch than the parameters alone is not simulated.
 */
function needed(plan: Plan, options: MaxBatchOptions): Needed {
  const one: Plan = { ...plan, training: { ...plan.training, batch_size: 1 } };
  const need = neededMemory(one, options.device);
  const { gpu: _cap, ...uncapped } = one;
  const fitsOn: Needed['fits_on'] = [];
  const parameterBytes = simulate(one, { device: options.device, timelinePoints: 0, peakDetails: false, neededOnOom: false, untilSteady: false }).model.parameter_bytes;
  for (const device of options.catalog ?? []) {
    const available = device.total_memory_bytes - device.non_pytorch_bytes;
    if (available < parameterBytes) continue;
    const r = simulate(uncapped as Plan, { device, timelinePoints: 0, peakDetails: false, neededOnOom: false, untilSteady: options.untilSteady });
    if (r.oom === null) fitsOn.push({ id: device.id ?? '', name: device.name, available_bytes: available });
  }
  return { ...need, fits_on: fitsOn };
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
