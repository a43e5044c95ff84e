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
import { memoryAvailableToPyTorch, outsideAllocatorBytes } from '../gpu/catalog.ts';
import type { Plan } from '../plan/schema.ts';
import type { MaxBatchResult, Needed, Recommendation, Trial, UnstableRegion } from '../result/max-batch.ts';
import { RESULT_SCHEMA_VERSION } from '../result/version.ts';
import { caveatsFor } from '../result/caveats.ts';
import { UNBOUNDED_MEMORY_BYTES, neededMemory, simulate } from '../train/simulate.ts';

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
  /**
   * Where a trial's outcome comes from (default: `simulateTrial` here): a host that simulated it elsewhere
   * (Note [Searching on every core]).
   */
  trialOutcome?: (batch: number) => TrialOutcome;
}

/** What a trial's simulation tells the search: the trial, and whether its cuDNN workspaces were all measured. */
export type TrialOutcome = Omit<Trial, 'index'> & { conv_workspaces_estimated: boolean };

/** The simulation a search runs for one batch: peaks only, every step to steady state unless told otherwise. */
export function simulateTrial(plan: Plan, batch: number, options: Pick<MaxBatchOptions, 'device' | 'untilSteady'>): TrialOutcome {
  const r = simulate(
    { ...plan, training: { ...plan.training, batch_size: batch } },
    { device: options.device, timelinePoints: 0, peakDetails: false, untilSteady: options.untilSteady, neededOnOom: false },
  );
  return {
    batch,
    fits: r.oom === null,
    peak_allocated_bytes: r.peak_allocated_bytes,
    peak_reserved_bytes: r.peak_reserved_bytes,
    oom: r.oom,
    conv_workspaces_estimated: r.caveats?.items.some((c) => c.id === 'conv_workspaces_estimated') ?? false,
  };
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
  /** What the allocator may reserve (capBytes). */
  readonly cap: number;
  /** Batches whose simulation used cuDNN workspaces the table has not measured (caveat conv_workspaces_estimated). */
  readonly estimatedWorkspaces: Set<number>;
  readonly trials: Trial[];
  readonly byBatch: Map<number, Trial>;
  run(batch: number): Trial;
}

function trialsOf(plan: Plan, options: MaxBatchOptions): Trials {
  const trials: Trial[] = [];
  const byBatch = new Map<number, Trial>();
  const estimatedWorkspaces = new Set<number>();
  const run = (batch: number): Trial => {
    const { conv_workspaces_estimated: estimated, ...outcome } = options.trialOutcome ? options.trialOutcome(batch) : simulateTrial(plan, batch, options);
    const trial: Trial = { index: trials.length + 1, ...outcome };
    if (estimated) estimatedWorkspaces.add(batch);
    trials.push(trial);
    byBatch.set(batch, trial);
    return trial;
  };
  return { cap: capBytes(plan, options.device), estimatedWorkspaces, trials, byBatch, run };
}

/**
 * The largest batch that fits (0: none), found as the whole search finds it (`searchMaxBatch` goes on from here
 * to the recommendation); yields each trial. With `inferred`, trials far from every simulated outcome that
 * decides them are not run (Note [Aimed searches]).
 */
function* searchLargest(options: MaxBatchOptions, trials: Trials, inferred = false): Generator<Trial, number, void> {
  const upper = options.maxBatch ?? 1 << 26;
  // Grow by doubling until a batch fails, then bisect between the last fit and the first failure.
  let good = 0;
  let bad = 0;
  for (let b = 1; b <= upper; b *= 2) {
    if (yield* fitsAt(b, trials, inferred)) good = b;
    else {
      bad = b;
      break;
    }
  }
  if (bad === 0) bad = upper + 1;
  good = yield* bisect(good, bad, trials, inferred);
  // The answer itself is always simulated: if it does not fit, an inference was wrong; search again simulating
  // every trial (those already run are kept).
  if (inferred && good > 0 && !(yield* fitsAt(good, trials))) return yield* searchLargest(options, trials);
  return yield* verifyAbove(good, upper, trials);
}

/**
 * Fit is taken as monotonic across gaps wider than this fraction of the batch (Note [Aimed searches]). The widest
 * non-monotonic stretch measured: BERT-large under 16 GiB runs out at 44 and fits at 47, 6.8% above.
 */
const kMonotonicGap = 0.1;

/** Aiming stops at a bracket this narrow (a fraction of its fitting batch): the search goes on from there. */
const kAimWithin = kMonotonicGap / 4;

/**
 * Whether a batch fits: its trial, simulated now unless it ran already or (with `inferred`) a simulated batch
 * more than kMonotonicGap larger fits, or one more than kMonotonicGap smaller runs out, and not both.
 */
function* fitsAt(batch: number, { trials, byBatch, run }: Trials, inferred = false): Generator<Trial, boolean, void> {
  const known = byBatch.get(batch);
  if (known) return known.fits;
  if (inferred) {
    let fits = false;
    let runsOut = false;
    for (const t of trials) {
      if (t.fits && t.batch * (1 - kMonotonicGap) >= batch) fits = true;
      if (!t.fits && t.batch <= batch * (1 - kMonotonicGap)) runsOut = true;
    }
    if (fits !== runsOut) return fits;
  }
  const t = run(batch);
  yield t;
  return t.fits;
}

/** Bisects between a batch that fits (or 0) and one that runs out: a fitting batch whose next one runs out. */
function* bisect(lo: number, hi: number, trials: Trials, inferred = false): Generator<Trial, number, void> {
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (yield* fitsAt(mid, trials, inferred)) lo = mid;
    else hi = mid;
  }
  return lo;
}

/**
 * The answer from a fitting batch whose next one runs out (0: none fits). Near the limit fit is not monotonic: the
 * answer is a batch whose next kVerifyAbove batches run out, the rule the boundary suite's fresh-process searches
 * follow (resources/measure/boundary_trials.py), and past them the batches a failing band may hide
 * (fitBeyondBand). Past a fitting one, grow by doubling and bisect again.
 */
function* verifyAbove(good: number, upper: number, trials: Trials): Generator<Trial, number, void> {
  for (;;) {
    let above = 0;
    for (let b = good + 1; b <= Math.min(good + kVerifyAbove, upper); b++) if (yield* fitsAt(b, trials)) above = b;
    if (above === 0 && good > 0) above = yield* fitBeyondBand(good, upper, trials);
    if (above === 0) return good;
    let lo = above;
    let step = kVerifyAbove + 1;
    for (;;) {
      const b = lo + step;
      if (b > upper) break;
      if (!(yield* fitsAt(b, trials))) break;
      lo = b;
      step *= 2;
    }
    good = yield* bisect(lo, Math.min(lo + step, upper + 1), trials);
  }
}

/** The spacing of the batches fitBeyondBand tries, as a fraction of the answer: the suite's target is 2%. */
const kBandProbe = 0.02;

/*
 * Note [Fit above a failing band]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * A batch runs out either because its tensors do not fit (the peak allocated memory would pass the cap: every
 * larger batch runs out too) or because the free memory lies in blocks too small or in the wrong pool: then a
 * larger batch, whose blocks split differently, can fit again. Measured on the H100 in fresh processes: ResNet-50
 * fp32, checkpointed, Adam under 8 GiB fits at 206 (memplan), runs out at 207, 208 and 209 and fits from 210 to
 * 213 (test/fixtures/boundary-suite); kVerifyAbove batches cannot see past such a band. Peak allocated memory
 * grows about linearly in the batch and cannot pass the cap, so past the answer B only batches up to where the
 * line through the fitting trials (bytesPerSample) reaches the cap can fit. When that bound lies past
 * B + kVerifyAbove, the search tries batches kBandProbe x B apart up to it, and no further than kMonotonicGap
 * above B (fit is taken as monotonic across wider gaps: at most 5 more trials), each simulated, and goes on from
 * the first that fits. A fitting stretch narrower than the
 * spacing can still be missed; the suite's target (at most 2% below the real largest) is what the spacing keeps.
 * When the tensors fill the cap (an MLP at its limit) the bound is B itself and nothing more runs.
 */
function* fitBeyondBand(good: number, upper: number, trials: Trials): Generator<Trial, number, void> {
  const fit = trials.byBatch.get(good);
  const slope = bytesPerSample(trials.trials);
  if (!fit || slope === null) return 0;
  const bound = Math.min(upper, Math.floor(good * (1 + kMonotonicGap)), good + Math.floor((trials.cap - fit.peak_allocated_bytes) / slope));
  const spacing = Math.max(kVerifyAbove + 1, Math.floor(good * kBandProbe));
  for (let b = good + spacing; b <= bound; b += spacing) if (yield* fitsAt(b, trials)) return b;
  return 0;
}

/**
 * Whether a batch fits, by a search: its trial's outcome where the search ran it (near the limit fit is not
 * monotonic: the MLP under 1 GiB runs out at 3584 below its answer 4096), else whether it is at most the answer.
 */
export function fitsBySearch(search: Pick<MaxBatchResult, 'trials' | 'max_batch'>, batch: number): boolean {
  return search.trials.find((t) => t.batch === batch)?.fits ?? batch <= search.max_batch;
}

/**
 * Where a search may start from what another search learned (Note [Aimed searches]): a batch to try first, and
 * how many bytes of peak allocated memory one more sample costs (null: not known).
 */
export interface SearchStart {
  batch: number;
  bytesPerSample: number | null;
  /** The start batch's outcome, when the caller has simulated it already (as a trial runs it). */
  tried?: Omit<Trial, 'index'>;
}

/**
 * Bytes of peak allocated memory per sample, from the fitting trials of a search: the slope from the largest
 * fitting batch down to the largest fitting batch at most half of it, or the smallest (null: fewer than two).
 */
export function bytesPerSample(trials: readonly Trial[]): number | null {
  let top: Trial | undefined;
  for (const t of trials) if (t.fits && (!top || t.batch > top.batch)) top = t;
  if (!top) return null;
  let below: Trial | undefined;
  for (const t of trials) {
    if (!t.fits || t.batch >= top.batch) continue;
    const better = !below || (t.batch <= top.batch / 2 ? below.batch > top.batch / 2 || t.batch > below.batch : below.batch > top.batch / 2 && t.batch < below.batch);
    if (better) below = t;
  }
  if (!below) return null;
  const slope = (top.peak_allocated_bytes - below.peak_allocated_bytes) / (top.batch - below.batch);
  return slope > 0 ? slope : null;
}

/*
 * Note [Aimed searches]
 * ~~~~~~~~~~~~~~~~~~~~~
 * Advice under the batch goal searches the largest batch of each variant of the plan (engine/search/advice.ts).
 * Grown by doubling from 1, such a search costs about 2 log2(answer) simulations: 18 for Llama 2 70B's 236, each a
 * whole model. A variant's answer is usually near the plan's, and once activations dominate the peak allocated
 * memory grows almost linearly in the batch (Llama 2 70B: 27,925 of 27,931 request sizes exactly linear). So a
 * variant's search starts at the plan's largest batch (a batch advice compares the variant at anyway) and aims
 * each next trial with the line through its fitting trials (the plan's slope until it has two), keeping a bracket
 * [largest fitting, smallest failing] that every trial narrows:
 * - after a batch that fits, where the line reaches the cap: allocated memory cannot pass the cap, so this is
 *   about the largest batch that could fit (fragmentation and cached blocks make the real one smaller);
 * - after one that runs out, where the line plus the fitting batch's reserved-but-unallocated bytes reaches the
 *   cap: about the largest that fits when that overhead stays. Near the cap release-and-retry frees cached
 *   blocks and the overhead shrinks (Llama 2 70B with expandable segments: 113 GiB at 193, 3 GiB at 236), so
 *   the truth lies between the two aims.
 * When the start itself runs out, the next trial is kMonotonicGap below it (the accumulation variant of Llama 2
 * 70B at the plan's 193 runs out and its answer is 189: halving tried 96, 144, 168, 180 and 186 before it reached
 * the boundary, 15 trials in all; from 173 the aim brackets it at 188-190 in three, 12 in all), then half of it
 * while nothing fits.
 * When an aim falls at or past a batch that ran out, or aiming has not halved the bracket in two trials, the
 * search bisects. Aiming stops when the bracket is narrower than kAimWithin of its fitting batch.
 *
 * Then the search runs as the plan's own does (searchLargest: doubling from 1, bisecting, verifyAbove), so that it
 * finds the same answer where fit is not monotonic (the MLP of examples/mlp-fp16.plan.json with expandable
 * segments fits at 648,609 with the next 3 running out, and again at 648,628: the doubling search answers
 * 648,609), but a trial is not run where simulated trials decide it across a gap of more than kMonotonicGap of
 * the batch: a batch 10% below one that fits fits, one 10% above one that runs out runs out. Only the trials near
 * the boundary run; the answer, and the kVerifyAbove batches above it, are always simulated (a wrong inference
 * makes the search start again simulating every trial). Advice reports none of these trials. The plan's own
 * search simulates every trial: its trials, unstable region and recommendation are what a user sees.
 */
function* aim(cap: number, options: MaxBatchOptions, trials: Trials, start: SearchStart): Generator<Trial, void, void> {
  const { byBatch, run } = trials;
  const upper = options.maxBatch ?? 1 << 26;
  let lo = 0; // the largest batch known to fit (0: none yet)
  let hi = upper + 1; // the smallest batch above lo known to run out
  let probes = 0;
  let widthBefore = Infinity; // the bracket's width two trials ago
  let next = Math.min(Math.max(1, start.batch), upper);
  const closeEnough = () => hi - lo <= Math.max(1, lo * kAimWithin);
  while (!closeEnough()) {
    let t = byBatch.get(next);
    if (!t) yield (t = run(next));
    if (t.fits) lo = next;
    else hi = next;
    if (closeEnough()) break;
    if (++probes % 2 === 0) {
      const halved = hi - lo <= widthBefore / 2;
      widthBefore = hi - lo;
      if (!halved && hi <= upper) {
        next = Math.floor((lo + hi) / 2);
        continue;
      }
    }
    const slope = bytesPerSample(trials.trials) ?? start.bytesPerSample;
    const fit = byBatch.get(lo);
    // The start ran out: a variant's answer is usually near the plan's, so first kMonotonicGap below it (a batch
    // that fits there lets the search infer every batch below its own kMonotonicGap band), then halving.
    if (!fit) next = probes === 1 ? Math.floor(hi * (1 - kMonotonicGap)) : Math.floor(hi / 2);
    else if (slope === null) next = hi <= upper ? Math.floor((lo + hi) / 2) : lo * 2;
    else next = lo + Math.floor((cap - (t.fits ? fit.peak_allocated_bytes : fit.peak_reserved_bytes)) / slope);
    // An aim at or past a batch that ran out says the line is wrong here: bisect.
    next = next >= hi ? Math.floor((lo + hi) / 2) : Math.max(next, lo + 1);
  }
}

/** A search that aims first, then finds the answer the doubling search finds (Note [Aimed searches]). */
function* aimedSearch(cap: number, options: MaxBatchOptions, trials: Trials, start: SearchStart): Generator<Trial, number, void> {
  yield* aim(cap, options, trials, start);
  return yield* searchLargest(options, trials, true);
}

/**
 * The largest batch that fits a variant of a plan (advice: engine/search/advice.ts), with the trials that found it:
 * the search's answer, without the recommendation, what limits the batch or what a plan that does not fit needs.
 * With `start`, the search is aimed from what the plan's own search learned (Note [Aimed searches]).
 */
export function largestBatch(plan: Plan, options: MaxBatchOptions, start?: SearchStart): { max_batch: number; trials: Trial[] } {
  const search = trialsOf(plan, options);
  if (start?.tried) {
    const trial = { ...start.tried, index: 1 };
    search.trials.push(trial);
    search.byBatch.set(trial.batch, trial);
  }
  const largest = start ? aimedSearch(capBytes(plan, options.device), options, search, start) : searchLargest(options, search);
  for (;;) {
    const next = largest.next();
    if (next.done) return { max_batch: next.value, trials: search.trials };
  }
}

/** What the trials of a search decide: the largest batch, the recommendation and why. */
interface Decided {
  good: number;
  recommended: number;
  reason: Recommendation['reason_id'];
}

/** Searches the largest batch, yielding each trial as it finishes; returns the result. */
export function* searchMaxBatch(plan: Plan, options: MaxBatchOptions): Generator<Trial, MaxBatchResult, void> {
  const search = trialsOf(plan, options);
  const decided = yield* decide(plan, options, search);
  return resultOf(plan, options, search, decided);
}

/** The trials of the search, and what they decide (the largest batch, the recommendation). */
function* decide(plan: Plan, options: MaxBatchOptions, search: Trials): Generator<Trial, Decided, void> {
  const margin = options.safetyMargin ?? DEFAULT_SAFETY_MARGIN;
  const multipleOf = Math.max(1, Math.floor(options.multipleOf ?? 1));
  const { trials, byBatch, run, cap } = search;
  const good = yield* searchLargest(options, search);
  const unstable = unstableRegionOf(trials, good);
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
  // Stepping below a failing neighbour, or falling back to the largest, can leave a batch that is no multiple: the
  // multiple below it, when one fits (a batch below a multiple is then never one: words say no multiple qualifies).
  if (multipleOf > 1 && recommended >= multipleOf && recommended % multipleOf !== 0) {
    const multiple = recommended - (recommended % multipleOf);
    let t = byBatch.get(multiple);
    if (!t) yield (t = run(multiple));
    if (t.fits) {
      recommended = multiple;
      if (!keepsMargin(t)) reason = 'margin_not_kept';
    }
  }
  return { good, recommended, reason };
}

/** Failing batches below the largest that fits, among the trials, and the fitting ones above the first of them. */
function unstableRegionOf(trials: readonly Trial[], good: number): UnstableRegion | null {
  const failingBelow = trials.filter((t) => !t.fits && t.batch < good).map((t) => t.batch).sort((a, b) => a - b);
  return failingBelow.length
    ? {
        from_batch: failingBelow[0]!,
        to_batch: good,
        failing_batches: failingBelow,
        fitting_batches: trials.filter((t) => t.fits && t.batch > failingBelow[0]! && t.batch <= good).map((t) => t.batch).sort((a, b) => a - b),
      }
    : null;
}

/** The search's result from what its trials decided: what limits the batch, what a plan that fits nowhere needs. */
function resultOf(plan: Plan, options: MaxBatchOptions, search: Trials, { good, recommended, reason }: Decided): MaxBatchResult {
  const margin = options.safetyMargin ?? DEFAULT_SAFETY_MARGIN;
  const multipleOf = Math.max(1, Math.floor(options.multipleOf ?? 1));
  const upper = options.maxBatch ?? 1 << 26;
  const { trials, byBatch, cap } = search;
  const recommendedTrial = byBatch.get(recommended);
  // What limits the batch: the largest batch that fits, simulated once more with what is live at its peak.
  const best = good > 0 ? simulate({ ...plan, training: { ...plan.training, batch_size: good } }, { device: options.device, timelinePoints: 0, untilSteady: options.untilSteady }) : null;
  return {
    schema_version: RESULT_SCHEMA_VERSION,
    kind: 'max_batch',
    plan_name: plan.name,
    gpu: { id: options.device.id ?? '', name: options.device.name, total_memory_bytes: options.device.total_memory_bytes, non_pytorch_bytes: outsideAllocatorBytes(options.device), cap_bytes: cap },
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
    // The trials the recommendation ran can find a failing batch below the largest too (Gemma 3 under 32 GiB: 7
    // runs out between 6 and 8): the region reported is over every trial.
    unstable_region: unstableRegionOf(trials, good),
    needed: good === 0 ? needed(plan, options) : null,
    // what the answer assumes, the answer's own simulation included
    caveats: caveatsFor(good > 0 ? { ...plan, training: { ...plan.training, batch_size: good } } : plan, options.device, { convWorkspacesEstimated: search.estimatedWorkspaces.has(good) }),
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
    const available = memoryAvailableToPyTorch(device);
    if (available < parameterBytes) continue;
    const r = simulate(uncapped as Plan, { device, timelinePoints: 0, peakDetails: false, neededOnOom: false, untilSteady: options.untilSteady });
    if (r.oom === null) fitsOn.push({ id: device.id ?? '', name: device.name, available_bytes: available });
  }
  return need ? { ...need, more_than_bytes: null, fits_on: fitsOn } : { peak_reserved_bytes: null, peak_allocated_bytes: null, more_than_bytes: UNBOUNDED_MEMORY_BYTES, fits_on: fitsOn };
}

/*
 * Note [Searching on every core]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * A search is a path of trials, each decided by the outcomes before it; a trial's outcome depends on its plan and
 * batch only (a simulation). So a host with idle cores can simulate ahead the trials the path will likely need,
 * and hand the search every outcome it has: the path, and with it the answer, the trials reported and their order,
 * is the one `searchMaxBatch` takes alone (`nextTrial` walks it with the outcomes known; a batch simulated ahead
 * that the path never reaches is dropped). `likelyTrials` guesses what comes next: it walks on past the next
 * trial with its outcome guessed both ways, each guess weighted by the line through the fitting trials' peak
 * reserved memory (fits when it stays under the cap; before two fitting trials, growing batches are taken to fit),
 * and lists the batches the likeliest paths reach first. A wrong guess costs a core's time, never an answer.
 */

/** A host's trialOutcome has no outcome for this batch yet: the walk stops there. */
class NotYetSimulated {
  readonly batch: number;
  constructor(batch: number) {
    this.batch = batch;
  }
}

/**
 * The search's path with the outcomes known: its trials so far, and the next batch it needs (null: the trials
 * known decide the search).
 */
function walk(plan: Plan, options: MaxBatchOptions, known: ReadonlyMap<number, TrialOutcome>): { trials: readonly Trial[]; next: number | null } {
  const trialOutcome = (batch: number) => {
    const outcome = known.get(batch);
    if (!outcome) throw new NotYetSimulated(batch);
    return outcome;
  };
  const search = trialsOf(plan, { ...options, trialOutcome });
  const steps = decide(plan, options, search);
  try {
    while (!steps.next().done);
    return { trials: search.trials, next: null };
  } catch (error) {
    if (error instanceof NotYetSimulated) return { trials: search.trials, next: error.batch };
    throw error;
  }
}

/** The next batch the search needs given the outcomes known (null: the trials known decide the search). */
export function nextTrial(plan: Plan, options: MaxBatchOptions, known: ReadonlyMap<number, TrialOutcome>): number | null {
  return walk(plan, options, known).next;
}

/**
 * The weight of a guessed outcome the line through the fitting trials predicts (the other gets the rest): it only
 * orders the guesses. With it, Llama 2 70B's search on 2 TiB used 11 of the 12 trials one worker simulated ahead.
 */
const kPredicted = 0.7;

/** Paths walked per batch asked for (each walk runs the search's logic with no simulation: microseconds). */
const kWalksPerGuess = 4;

/**
 * Up to `count` batches the search will likely need after those known (Note [Searching on every core]), likeliest
 * first, leaving out those in `skip` (simulated or being simulated).
 */
export function likelyTrials(plan: Plan, options: MaxBatchOptions, known: ReadonlyMap<number, TrialOutcome>, count: number, skip: ReadonlySet<number>): number[] {
  const cap = capBytes(plan, options.device);
  const chosen: number[] = [];
  const frontier: { known: Map<number, TrialOutcome>; likelihood: number }[] = [{ known: new Map(known), likelihood: 1 }];
  for (let walks = 0; frontier.length > 0 && chosen.length < count && walks < kWalksPerGuess * (count + 2); walks++) {
    let best = 0;
    for (let i = 1; i < frontier.length; i++) if (frontier[i]!.likelihood > frontier[best]!.likelihood) best = i;
    const path = frontier.splice(best, 1)[0]!;
    const batch = nextTrial(plan, options, path.known);
    if (batch === null) continue;
    if (!skip.has(batch) && !chosen.includes(batch)) chosen.push(batch);
    const predicted = guessFits(path.known, batch, cap);
    for (const fits of [true, false]) {
      frontier.push({ known: new Map(path.known).set(batch, guessOutcome(path.known, batch, fits)), likelihood: path.likelihood * (fits === predicted ? kPredicted : 1 - kPredicted) });
    }
  }
  return chosen;
}

/** The two fitting trials nearest a batch (for a line through their peaks), or fewer. */
function nearestFitting(known: ReadonlyMap<number, TrialOutcome>, batch: number): TrialOutcome[] {
  return [...known.values()].filter((t) => t.fits).sort((a, b) => Math.abs(a.batch - batch) - Math.abs(b.batch - batch)).slice(0, 2);
}

/** Whether a batch likely fits: under the cap on the line through the fitting trials' peak reserved memory. */
function guessFits(known: ReadonlyMap<number, TrialOutcome>, batch: number, cap: number): boolean {
  const [a, b] = nearestFitting(known, batch);
  if (!a || !b) {
    // Before a line: a batch fails when one no larger failed, else it is taken to fit (as doubling finds them).
    for (const t of known.values()) if (!t.fits && t.batch <= batch) return false;
    return true;
  }
  const slope = (b.peak_reserved_bytes - a.peak_reserved_bytes) / (b.batch - a.batch);
  return a.peak_reserved_bytes + slope * (batch - a.batch) <= cap;
}

/** A guessed outcome: its peaks on the line through the nearest fitting trials (a guess steers only what runs ahead). */
function guessOutcome(known: ReadonlyMap<number, TrialOutcome>, batch: number, fits: boolean): TrialOutcome {
  const [a, b] = nearestFitting(known, batch);
  const at = (peak: (t: TrialOutcome) => number) => {
    if (!a) return 0;
    if (!b) return peak(a);
    return Math.max(0, peak(a) + ((peak(b) - peak(a)) / (b.batch - a.batch)) * (batch - a.batch));
  };
  return {
    batch,
    fits,
    peak_allocated_bytes: Math.round(at((t) => t.peak_allocated_bytes)),
    peak_reserved_bytes: Math.round(at((t) => t.peak_reserved_bytes)),
    oom: fits ? null : { message: 'guessed', step: 1, phase: 'forward' },
    conv_workspaces_estimated: false,
  };
}

/** Workers that simulate trials off the thread that searches (the CLI's worker threads), started when a search asks. */
export interface TrialPool {
  /** Workers running (0 until `start`, and where the host has none). */
  readonly size: number;
  /** Workers that may simulate ahead while the searching thread simulates too (it keeps a core). */
  readonly ahead: number;
  start(): void;
  /** A trial's outcome, simulated by the next free worker. */
  simulate(plan: Plan, batch: number, options: Pick<MaxBatchOptions, 'untilSteady'>): Promise<TrialOutcome>;
}

/**
 * A search starts its pool when its second trial took at least this long (the first pays for compiling the engine):
 * a search of seconds. A worker loads and compiles the engine anew and runs its first simulations slower than the
 * warm searching thread, so shorter searches finish sooner without. Measured with the CLI on the 2-core machine
 * (second trial): GPT-2 XL 46-57 ms (its max-batch with advice takes 1 s, and workers made it slower), Llama 3 8B
 * 39-43 ms, Llama 2 70B (seq 4096, checkpointed) 92-103 ms, a 405B-shaped Llama 189-196 ms (what workers gained:
 * cli/engine-workers.ts).
 */
export const kWorthWorkersMs = 75;

/** How a search on a pool reports (Note [Searching on every core]). */
export interface PoolSearchOptions {
  pool: TrialPool;
  /** Start the pool after a second trial this long (default kWorthWorkersMs; tests pass 0). */
  worthWorkersMs?: number;
  /** Each trial of the path as it joins it, in order. */
  onTrial?: (trial: Trial) => void;
  /**
   * Awaited between trials: it must let the event loop run (a macrotask, e.g. `setImmediate`), or the workers'
   * outcomes are not seen until this thread waits for one; a host that cancels searches throws there.
   */
  pause?: () => Promise<void>;
}

/** What a search on a pool did: trials simulated by the searching thread, ahead by the pool, and of those the ones the path used. */
export interface PoolSearchStats {
  onThisThread: number;
  ahead: number;
  aheadUsed: number;
}

/**
 * The result `findMaxBatch(plan, options)` gives, on a pool (Note [Searching on every core]): this thread
 * simulates the trial the search needs, or when a worker already does, the likeliest one after it; the pool's
 * workers (started after a second trial of `worthWorkersMs` or more) simulate the trials the search will likely
 * need next. Then the search walks the known path once more and simulates its answer's details here.
 */
export async function searchOnPool(plan: Plan, options: MaxBatchOptions, on: PoolSearchOptions, stats: PoolSearchStats = { onThisThread: 0, ahead: 0, aheadUsed: 0 }): Promise<MaxBatchResult> {
  const { pool } = on;
  const worth = on.worthWorkersMs ?? kWorthWorkersMs;
  const known = new Map<number, TrialOutcome>();
  const running = new Map<number, Promise<void>>();
  /** Batches this thread simulated; batches a worker failed on (this thread simulates them, if the path needs them). */
  const onThisThread = new Set<number>();
  const failed = new Set<number>();
  let reported = 0;
  for (;;) {
    await on.pause?.();
    const path = walk(plan, options, known);
    for (; reported < path.trials.length; reported++) on.onTrial?.(path.trials[reported]!);
    const need = path.next;
    if (need === null) break;
    const ahead = Math.min(pool.size, pool.ahead);
    const busy = new Set([...known.keys(), ...running.keys()]);
    const wanted = ahead > 0 ? likelyTrials(plan, options, known, ahead + 1, busy) : [];
    if (!busy.has(need) && !wanted.includes(need)) wanted.unshift(need);
    // This thread takes the needed trial unless a worker has it, then the likeliest.
    const mine = wanted.shift();
    for (const batch of wanted) {
      if (running.size >= ahead) break;
      if (failed.has(batch)) continue;
      stats.ahead++;
      running.set(
        batch,
        pool.simulate(plan, batch, { untilSteady: options.untilSteady }).then(
          (outcome) => {
            known.set(batch, outcome);
            running.delete(batch);
          },
          () => {
            running.delete(batch); // this thread simulates it itself, if the search needs it, and says why it fails
            failed.add(batch);
          },
        ),
      );
    }
    if (mine === undefined) {
      await running.get(need);
      continue;
    }
    const start = performance.now();
    try {
      known.set(mine, simulateTrial(plan, mine, options));
    } catch (error) {
      // A guess that fails costs its time, not the search: the path may never need it (if it does, it fails there).
      if (mine === need) throw error;
      failed.add(mine);
      continue;
    }
    if (onThisThread.size === 1 && pool.size === 0 && performance.now() - start >= worth) pool.start();
    onThisThread.add(mine);
  }
  const result = findMaxBatch(plan, { ...options, trialOutcome: (batch) => known.get(batch)! });
  stats.onThisThread = onThisThread.size;
  stats.aheadUsed = result.trials.filter((t) => !onThisThread.has(t.batch)).length;
  return result;
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
