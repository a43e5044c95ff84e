/**
 * The boundary suite (test/fixtures/boundary-suite/suite.json): real max-batch searches on an H100, every trial a
 * 6-step training run in a fresh process (resources/measure/boundary_trials.py). For each case: memplan's largest
 * batch for the same plan and steps, against the largest that fit in a fresh process, and the simulated peak
 * reserved at that verified batch against the real one. Shared by `npm run bench:accuracy` and
 * test/engine/search/boundary.test.ts.
 */
import { readFileSync } from 'node:fs';
import { planGpu } from '../cli/gpus.ts';
import { parsePlan } from '../engine/plan/parse.ts';
import { findMaxBatch } from '../engine/search/max-batch.ts';
import { simulate } from '../engine/train/simulate.ts';

export interface SuiteTrial {
  batch: number;
  fits: boolean;
  peak_allocated_bytes: number | null;
  peak_reserved_bytes: number | null;
  failed_in_step: number | null;
  num_alloc_retries: number | null;
  skipped_steps?: number[];
}

export interface SuiteCase {
  name: string;
  plan: Record<string, unknown> & { training: Record<string, unknown> };
  cap_bytes: number | null;
  steps_per_trial: number;
  largest_fresh: number;
  search_complete: boolean;
  /** Where memplan misses the target, the allocation or behaviour found to differ. */
  known_failure: string | null;
  trials: SuiteTrial[];
}

export interface SuiteOutcome {
  predicted: number;
  /** predicted <= largest_fresh */
  neverAbove: boolean;
  /** at most 2% below (1 below under 50) */
  closeBelow: boolean;
  /** |simulated - real| / real peak reserved at largest_fresh, or null if that trial has no peaks */
  reservedError: number | null;
  /** Batches that fit above one that runs out, as the search reports them (e.g. "44-47"), or null. */
  unstableRegion: string | null;
  ok: boolean;
}

export function loadSuite(): SuiteCase[] {
  return JSON.parse(readFileSync(new URL('../test/fixtures/boundary-suite/suite.json', import.meta.url), 'utf8')).cases;
}

export function evaluateCase(c: SuiteCase): SuiteOutcome {
  // the plan as the trials ran it: 6 steps (the search goes on past them while the peak reserved still rises)
  const plan = parsePlan({ ...c.plan, training: { ...c.plan.training, steps: c.steps_per_trial } });
  const device = planGpu(plan);
  const search = findMaxBatch(plan, { device });
  const predicted = search.max_batch;
  const region = search.unstable_region;
  const real = c.largest_fresh;
  const slack = real < 50 ? 1 : Math.floor(real * 0.02);
  const at = c.trials.find((t) => t.batch === real);
  let reservedError: number | null = null;
  if (at?.fits && at.peak_reserved_bytes) {
    const r = simulate({ ...plan, training: { ...plan.training, batch_size: real } }, { device, timelinePoints: 0, peakDetails: false, untilSteady: false });
    reservedError = Math.abs(r.peak_reserved_bytes - at.peak_reserved_bytes) / at.peak_reserved_bytes;
  }
  const neverAbove = predicted <= real;
  const closeBelow = predicted >= real - slack;
  const unstableRegion = region ? `${region.from_batch}-${region.to_batch}` : null;
  return { predicted, neverAbove, closeBelow, reservedError, unstableRegion, ok: neverAbove && closeBelow && (reservedError === null || reservedError <= 0.01) };
}
