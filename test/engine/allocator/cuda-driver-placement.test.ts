/**
 * Note [cudaMalloc placement] (engine/allocator/device-memory.ts) against the H100: every recording's
 * segment_alloc/segment_free sequence, replayed with plain cuMemAlloc/cuMemFree in a fresh process
 * (resources/measure/probe_segment_placement.py, test/fixtures/device/h100_segment_placement.json), and a few
 * hand-made sequences (frees, reuse of unmapped reservations, 2 MiB leftovers).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CudaDriverAddressSpace } from '../../../engine/allocator/device-memory.ts';
import { readSnapshotBytes } from '../../../engine/snapshot/snapshot.ts';

const MiB = 1_048_576;
const fixtures = new URL('../../fixtures/', import.meta.url);
const measured = JSON.parse(readFileSync(new URL('device/h100_segment_placement.json', fixtures), 'utf8')) as {
  replays: Record<string, (number | null)[]>;
  micro: Record<string, { ops: number[][]; addrs: (number | null)[] }>;
};
const folders: Record<string, string> = {
  traces: 'traces',
  calibration: 'calibration',
  recordings: 'boundary-suite/recordings',
};

/** [size] for a segment_alloc, [-(i+1)] for the segment_free of the i-th: as the probe replays them. */
function segmentSequence(key: string): number[][] {
  const [folder, name] = key.split('/') as [string, string];
  const { trace } = readSnapshotBytes(readFileSync(new URL(`${folders[folder]}/${name}.pickle.gz`, fixtures)));
  const ops: number[][] = [];
  const live = new Map<number, number>();
  let n = 0;
  for (const e of trace) {
    if (e.action === 'segment_alloc') {
      live.set(e.addr, n++);
      ops.push([e.size]);
    } else if (e.action === 'segment_free' && live.has(e.addr)) {
      ops.push([-(live.get(e.addr)! + 1)]);
      live.delete(e.addr);
    }
  }
  return ops;
}

/** The addresses the rule gives, in MiB from the context's range, one per allocation. */
function placements(ops: number[][]): number[] {
  const space = new CudaDriverAddressSpace();
  const ptrs: number[] = [];
  const sizes: number[] = [];
  for (const [op] of ops) {
    if (op! > 0) {
      ptrs.push(space.take(op!));
      sizes.push(op!);
    } else {
      space.give(ptrs[-op! - 1]!, sizes[-op! - 1]!);
    }
  }
  return ptrs.map((p) => (p - space.contextRangeBase) / MiB);
}

describe('Note [cudaMalloc placement]: where the CUDA driver puts each segment (H100, driver 580)', () => {
  const keys = Object.keys(measured.replays);
  it('covers every recording that allocates segments (80 sequences, 5,907 segments)', () => {
    expect(keys.length).toBe(80);
    expect(keys.reduce((n, k) => n + measured.replays[k]!.length, 0)).toBe(5907);
  });

  const odd = 'calibration/vit_b_16_amp_bf16_adamw_fused';
  for (const key of keys.filter((k) => k !== odd)) {
    it(`${key}: every segment where the driver put it`, () => {
      expect(placements(segmentSequence(key))).toEqual(measured.replays[key]);
    });
  }

  it(`${odd}: a free gap above the context's range took the third segment, the rest lie 32 MiB higher`, () => {
    const rule = placements(segmentSequence(odd));
    const real = measured.replays[odd]! as number[];
    expect(real.slice(0, 2)).toEqual(rule.slice(0, 2));
    expect(real[2]).toBeGreaterThan(512); // above the 512 MiB context range: a gap the rule does not know of
    expect(real.slice(3)).toEqual(rule.slice(3).map((a) => a + 32));
  });

  for (const [name, { ops, addrs }] of Object.entries(measured.micro)) {
    it(`hand-made sequence ${name}`, () => {
      expect(placements(ops.map(([op]) => [op! > 0 ? op! * MiB : op!]))).toEqual(addrs);
    });
  }

  it('a new reservation is 32 MiB aligned and filled bottom-up; an emptied one is unmapped, its range reused', () => {
    const space = new CudaDriverAddressSpace();
    const top = space.contextRangeBase;
    expect(space.take(20 * MiB)).toBe(top + 488 * MiB); // the context's own 24 MiB first
    const b1 = space.take(20 * MiB); // a new 32 MiB reservation just below the context's range
    expect(b1).toBe(top - 32 * MiB);
    expect(space.take(12 * MiB)).toBe(b1 + 20 * MiB); // the 12 MiB left above b1
    const b2 = space.take(32 * MiB);
    const b3 = space.take(32 * MiB);
    expect([b2, b3]).toEqual([top - 64 * MiB, top - 96 * MiB]);
    space.give(b2, 32 * MiB); // unmapped: a gap of exactly 32 MiB between b1 and b3
    expect(space.take(32 * MiB)).toBe(top - 128 * MiB); // passed over: the gap must be larger than the reservation
    space.give(b3, 32 * MiB); // the gap grows to 64 MiB
    expect(space.take(30 * MiB)).toBe(top - 64 * MiB); // the top of the highest gap that is large enough
  });
});

describe('Note [cuMemAddressReserve placement]: where the driver puts expandable segments (H100, driver 580)', () => {
  it("upward, each at the next 32 MiB boundary: a whole-GPU run's large, small and second large segments where the H100 put them", () => {
    // GPT-2 large in AMP bf16 with expandable segments on the whole H100 at batch 15: the large pool's segment first
    // (its first page mapped at its base), then the small pool's, and in step 6 a second large segment for a 2.88 GiB
    // gradient the first had no address space left for (its block at the new segment's base)
    const { trace } = readSnapshotBytes(readFileSync(new URL('boundary-suite/recordings/gpt2_large_amp_bf16_adamw_seq1024_expandable_whole_gpu_b15_10steps.pickle.gz', fixtures)));
    const maps = trace.filter((e) => e.action === 'segment_map');
    const largeBase = maps[0]!.addr;
    const smallBase = maps.find((e) => e.size === 2 * MiB)!.addr;
    const secondLargeBase = trace.find((e) => e.action === 'alloc' && e.size === 3_087_790_080 && e.addr > smallBase)!.addr;
    const total = 85_017_493_504; // the H100's totalGlobalMem: each range is 1.125 x it, in whole pages
    const range = (page: number) => Math.ceil((total + Math.floor(total / 8)) / page) * page;
    const space = new CudaDriverAddressSpace();
    expect(space.reserveAddressSpace(range(20 * MiB))).toBe(largeBase);
    expect(space.reserveAddressSpace(range(2 * MiB))).toBe(smallBase);
    expect(space.reserveAddressSpace(range(20 * MiB))).toBe(secondLargeBase);
    expect([largeBase, smallBase, secondLargeBase]).toEqual([0x3_0200_0000, 0x19_4800_0000, 0x2f_8e00_0000]);
  });
});
