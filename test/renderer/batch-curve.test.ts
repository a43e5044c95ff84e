import { describe, expect, it } from 'vitest';
import { nonMonotonicRange, remainingTrials } from '../../renderer/src/charts/batch-curve.ts';

describe('a max-batch search seen on its curve', () => {
  it('finds the range where a larger batch fits although a smaller one did not', () => {
    // the AMP bf16 MLP under a 3 GiB cap (test/fixtures/boundary): fits at 6272, out of memory at 6273, fits at 6528
    const trials = [
      { batch: 4096, fits: true },
      { batch: 8192, fits: false },
      { batch: 6272, fits: true },
      { batch: 6273, fits: false },
      { batch: 6528, fits: true },
    ];
    expect(nonMonotonicRange(trials)).toEqual({ lo: 6273, hi: 6528 });
  });
  it('reports none for a monotonic search', () => {
    expect(nonMonotonicRange([{ batch: 1, fits: true }, { batch: 2, fits: true }, { batch: 4, fits: false }, { batch: 3, fits: true }])).toBeNull();
  });
  it('estimates the trials left once the doubling has failed', () => {
    expect(remainingTrials([{ batch: 1, fits: true }, { batch: 2, fits: true }])).toBeNull();
    expect(remainingTrials([{ batch: 64, fits: true }, { batch: 128, fits: false }])).toBe(8);
  });
});
