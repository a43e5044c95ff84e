/** What a max-batch search's trials say beyond the answer: where "fits" is not monotonic in the batch size. */

export interface TrialPoint {
  batch: number;
  fits: boolean;
}

/**
 * The batch range where a larger batch fits although a smaller one ran out of memory (measured on the H100: near
 * the limit the allocator's block layout decides, test/fixtures/boundary), or null. Spans from the smallest
 * failing batch below a fitting one to the largest fitting batch above a failure.
 */
export function nonMonotonicRange(trials: readonly TrialPoint[]): { lo: number; hi: number } | null {
  let lo = Infinity;
  let hi = -Infinity;
  for (const f of trials) {
    if (f.fits) continue;
    for (const g of trials) {
      if (g.fits && g.batch > f.batch) {
        lo = Math.min(lo, f.batch);
        hi = Math.max(hi, g.batch);
      }
    }
  }
  return lo <= hi ? { lo, hi } : null;
}

/**
 * About how many trials the search still needs: unknown (null) while it doubles, then the bisection's
 * log2(gap) plus a couple to refine the recommendation (engine/search/max-batch.ts).
 */
export function remainingTrials(trials: readonly TrialPoint[]): number | null {
  let good = 0;
  let bad = Infinity;
  for (const t of trials) {
    if (t.fits) good = Math.max(good, t.batch);
    else bad = Math.min(bad, t.batch);
  }
  if (!Number.isFinite(bad)) return null;
  const gap = Math.max(1, bad - good);
  return Math.ceil(Math.log2(gap)) + 2;
}
