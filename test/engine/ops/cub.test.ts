/**
 * CUB's temporary storage through the caching allocator (engine/ops/cub.ts), against the sizes the H100 asked for:
 * torch.cumsum over one row (test/fixtures/device/h100_cub_scan.json, resources/measure/probe_cub_scan.py).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { inclusiveScanTempBytes } from '../../../engine/ops/cub.ts';

const fixture = JSON.parse(readFileSync(new URL('../../fixtures/device/h100_cub_scan.json', import.meta.url), 'utf8')) as {
  cases: { dtype: 'int64' | 'int32' | 'int64_2rows'; n: number; allocs: number[] }[];
};

describe('torch.cumsum over one row: CUB’s scan storage, as the H100 asked for it', () => {
  it('every measured length, 1,024 to 131,072 items: one more tile state per 896 items', () => {
    // integers scan in int64 (an int32 input is converted first): the storage is the last allocation
    const scanned = fixture.cases.filter((c) => c.dtype !== 'int64_2rows');
    expect(scanned.length).toBe(13);
    for (const c of scanned) expect(inclusiveScanTempBytes(c.n, 8), `${c.dtype} ${c.n}`).toBe(c.allocs.at(-1));
    // the steps the tiles make: 16 tiles (14,336 items) in 1,279 B, the 17th tile's first item 1,535 B
    expect(fixture.cases.filter((c) => c.dtype === 'int64').map((c) => c.allocs.at(-1))).toEqual([1279, 1279, 1535, 1535, 1535, 1791, 2303, 3583]);
  });

  it('an int32 scan (Mixtral’s cumsum with dtype=int32 of 8 expert counts): 8-byte tile states, 1,023 B as recorded', () => {
    expect(inclusiveScanTempBytes(8, 4)).toBe(1023);
  });
});
