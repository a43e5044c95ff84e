/**
 * engine/allocator/block.ts's SortedBlocks (a pool's free blocks in runs of at most 64) against a plain sorted array
 * on random inserts and erases of pools up to a few thousand blocks: order, lowerBound, next/prev, has and size,
 * and positions before an erased block kept (the allocator's release loop walks down while it erases).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Block, BlockPool, SortedBlocks } from '../../../engine/allocator/block.ts';

const pool = new BlockPool(false);

/** `BlockComparatorSize` and `BlockComparatorAddress`, on the model's side. */
const bySize = (a: Block, b: Block) => a.stream - b.stream || a.size - b.size || a.ptr - b.ptr;
const byAddress = (a: Block, b: Block) => a.stream - b.stream || a.ptr - b.ptr;

/** Every position from the first block on, by `next`, with the block at each. */
function walk(set: SortedBlocks): Block[] {
  const seen: Block[] = [];
  for (let pos = set.lowerBound(-Infinity, -Infinity, -Infinity); pos !== set.end(); pos = set.next(pos)) seen.push(set.at(pos));
  return seen;
}

type Op = { insert: { stream: number; size: number } } | { erase: number } | { releaseDown: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 10, arbitrary: fc.record({ insert: fc.record({ stream: fc.constantFrom(0, 0, 0, 1), size: fc.integer({ min: 1, max: 40 }) }) }) },
  { weight: 4, arbitrary: fc.record({ erase: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ releaseDown: fc.nat() }) },
);

describe('SortedBlocks', () => {
  for (const ordered of ['size', 'address'] as const) {
    it(`holds the blocks as a sorted array would, ordered by ${ordered}`, () => {
      const compare = ordered === 'size' ? bySize : byAddress;
      let largest = 0;
      fc.assert(
        fc.property(fc.array(op, { minLength: 1000, maxLength: 3000 }), (ops) => {
          const set = new SortedBlocks(ordered === 'address');
          const model: Block[] = [];
          let ptr = 0;
          for (const o of ops) {
            if ('insert' in o) {
              const b = new Block(o.insert.stream, o.insert.size * 512, pool, (ptr += 1 + ((ptr * 7919) % 13)) * 512);
              set.insert(b);
              const at = model.findIndex((m) => compare(m, b) > 0);
              model.splice(at < 0 ? model.length : at, 0, b);
            } else if ('erase' in o && model.length > 0) {
              const b = model.splice(o.erase % model.length, 1)[0]!;
              expect(set.erase(b)).toBe(true);
              expect(set.erase(b)).toBe(false);
            } else if ('releaseDown' in o && model.length > 0) {
              // As release_available_cached_blocks walks: from a position down, erasing each block it passes.
              let pos = set.lowerBound(model[o.releaseDown % model.length]!.stream, model[o.releaseDown % model.length]!.size, model[o.releaseDown % model.length]!.ptr);
              for (let k = 0; k < 3 && pos >= 0; k++) {
                const b = set.at(pos);
                pos = set.prev(pos);
                set.erase(b);
                model.splice(model.indexOf(b), 1);
              }
            }
            largest = Math.max(largest, model.length);
          }
          expect(set.size).toBe(model.length);
          expect(set.toArray()).toEqual(model);
          expect(walk(set)).toEqual(model);
          for (let i = 0; i < model.length; i += 7) {
            const b = model[i]!;
            expect(set.has(b)).toBe(true);
            const pos = set.lowerBound(b.stream, b.size, b.ptr);
            expect(set.at(pos)).toBe(b);
            expect(set.prev(pos) < 0 ? null : set.at(set.prev(pos))).toBe(model[i - 1] ?? null);
            // The first block not less than a key between b's and the previous one's is b.
            const keyPos = ordered === 'size' ? set.lowerBound(b.stream, b.size, b.ptr - 1) : set.lowerBound(b.stream, 0, b.ptr - 1);
            expect(set.at(keyPos)).toBe(b);
          }
          expect(set.prev(set.end()) < 0 ? null : set.at(set.prev(set.end()))).toBe(model.at(-1) ?? null);
        }),
        { numRuns: 60 },
      );
      // The runs split and merge: pools far past one run of 64 blocks were tried.
      expect(largest).toBeGreaterThan(256);
    });
  }
});
