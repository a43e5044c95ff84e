/**
 * Note [Searching on every core]: the search's path walked with outcomes a host simulated elsewhere, and the
 * trials it will likely need next.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { planGpu } from '../../../cli/gpus.ts';
import { findMaxBatch, likelyTrials, nextTrial, parsePlan, simulateTrial, type Plan, type TrialOutcome } from '../../../engine/index.ts';

const example = JSON.parse(readFileSync(new URL('../../../examples/gpt2-config-json.plan.json', import.meta.url), 'utf8')) as object;
const plan: Plan = parsePlan({ ...example, gpu: { memory_limit_bytes: 6 * 2 ** 30 } });
const device = planGpu(plan);
const options = { device };

describe('nextTrial and likelyTrials', () => {
  const search = findMaxBatch(plan, options);
  const outcomes = new Map<number, TrialOutcome>(search.trials.map(({ index: _index, ...t }) => [t.batch, { ...t, conv_workspaces_estimated: false }]));

  it('walks the search: batch 1 first, each next trial given those before it, none once all are known', () => {
    const known = new Map<number, TrialOutcome>();
    expect(nextTrial(plan, options, known)).toBe(1);
    for (const t of search.trials) {
      expect(nextTrial(plan, options, known), `trial ${t.index}`).toBe(t.batch);
      known.set(t.batch, outcomes.get(t.batch)!);
    }
    expect(nextTrial(plan, options, known)).toBeNull();
  });

  it('outcomes known out of order (simulated ahead) give the same path; extra ones are not trials', () => {
    const known = new Map(outcomes);
    known.set(3, simulateTrial(plan, 3, options)); // simulated ahead, never on the path
    const r = findMaxBatch(plan, { ...options, trialOutcome: (b) => known.get(b)! });
    expect(r).toEqual(search);
    expect(r.trials.some((t) => t.batch === 3)).toBe(false);
  });

  it('guesses what the search needs next: doubling while batches fit, both halves of a bracket', () => {
    const known = new Map<number, TrialOutcome>([[1, outcomes.get(1)!]]);
    // after batch 1 fits: 2 (needed now), then 4 and 8 on the likeliest path
    expect(likelyTrials(plan, options, known, 3, new Set())).toEqual([2, 4, 8]);
    // with the bracket of the real search (the last fitting power of two and the first failing one), its middle
    // first, then the middles of both halves
    const first = search.trials.findIndex((t) => !t.fits);
    const prefix = new Map(search.trials.slice(0, first + 1).map((t) => [t.batch, outcomes.get(t.batch)!]));
    const lo = search.trials[first - 1]!.batch;
    const hi = search.trials[first]!.batch;
    const mid = Math.floor((lo + hi) / 2);
    const guesses = likelyTrials(plan, options, prefix, 3, new Set());
    expect(guesses[0]).toBe(mid);
    expect(new Set(guesses.slice(1))).toEqual(new Set([Math.floor((lo + mid) / 2), Math.floor((mid + hi) / 2)]));
    // nothing known or being simulated is listed
    expect(likelyTrials(plan, options, prefix, 3, new Set([mid]))).not.toContain(mid);
  });
});
