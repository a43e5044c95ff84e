/**
 * Properties of the caching allocator that hold for every program, checked on random sequences of malloc, free
 * and empty_cache() under random settings (fast-check). PyTorch asserts the same in CUDACachingAllocator.cpp:
 * `decrease_stat` checks that no stat goes negative, `release_block` that a released segment is whole, and the
 * memory fraction caps `total_allocated_memory`.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CachingAllocator, OutOfMemoryError, type TraceAction } from '../../../engine/allocator/caching-allocator.ts';
import { parseAllocatorConf } from '../../../engine/allocator/config.ts';
import { SimulatedDevice } from '../../../engine/allocator/device-memory.ts';
import type { Block } from '../../../engine/allocator/block.ts';
import { STAT_ARRAY_NAMES } from '../../../engine/allocator/stats.ts';
import { steadyStateKey } from '../../../engine/train/steady-state.ts';

const MiB = 1_048_576;
const GiB = 1024 * MiB;
const RUNS = 400;

type Op = { kind: 'malloc'; bytes: number; stream: number } | { kind: 'free'; index: number } | { kind: 'empty_cache' };

/** Request sizes spread over the small pool, the 1-10 MiB band (20 MiB segments) and large requests. */
const requestBytes = fc.oneof(
  fc.integer({ min: 1, max: MiB }),
  fc.integer({ min: MiB + 1, max: 10 * MiB }),
  fc.integer({ min: 10 * MiB, max: 600 * MiB }),
);

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('malloc' as const), bytes: requestBytes, stream: fc.constantFrom(0, 0, 0, 1) }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('free' as const), index: fc.nat() }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'empty_cache' as const }) },
);

/** A PYTORCH_CUDA_ALLOC_CONF string built from the options memplan simulates. */
const allocConf = fc
  .record({
    maxSplit: fc.option(fc.constantFrom(20, 64, 256, 1024), { nil: undefined }),
    divisions: fc.option(fc.constantFrom(1, 2, 4, 8, 16), { nil: undefined }),
    gc: fc.option(fc.constantFrom(0.5, 0.8, 0.95), { nil: undefined }),
    expandable: fc.boolean(),
  })
  .map(({ maxSplit, divisions, gc, expandable }) =>
    [
      maxSplit !== undefined ? `max_split_size_mb:${maxSplit}` : '',
      divisions !== undefined ? `roundup_power2_divisions:${divisions}` : '',
      gc !== undefined ? `garbage_collection_threshold:${gc}` : '',
      expandable ? 'expandable_segments:True' : '',
    ]
      .filter(Boolean)
      .join(','),
  );

const scenario = fc.record({
  conf: allocConf,
  capBytes: fc.option(fc.integer({ min: 64 * MiB, max: 4 * GiB }), { nil: undefined }),
  ops: fc.array(op, { minLength: 1, maxLength: 120 }),
});

interface Run {
  allocator: CachingAllocator;
  live: Block[];
  trace: string[];
  /** Segments by address, from the trace's segment_alloc and segment_free (non-expandable settings). */
  segments: Map<number, number>;
  expandable: boolean;
}

function execute(conf: string, capBytes: number | undefined, ops: Op[], check: (run: Run) => void = () => {}): Run {
  const segments = new Map<number, number>();
  const trace: string[] = [];
  const allocator = new CachingAllocator({
    config: parseAllocatorConf(conf),
    device: new SimulatedDevice(80 * GiB),
    totalGlobalMemBytes: 80 * GiB,
    memoryLimitBytes: capBytes,
    onTrace: (action: TraceAction, addr: number, size: number, stream: number) => {
      trace.push(`${action} ${addr} ${size} ${stream}`);
      if (action === 'segment_alloc') segments.set(addr, size);
      if (action === 'segment_free') segments.delete(addr);
    },
  });
  const run: Run = { allocator, live: [], trace, segments, expandable: allocator.config.expandableSegments };
  for (const o of ops) {
    if (o.kind === 'malloc') {
      try {
        run.live.push(allocator.malloc(o.bytes, o.stream));
      } catch (error) {
        if (!(error instanceof OutOfMemoryError)) throw error;
      }
    } else if (o.kind === 'free') {
      if (run.live.length === 0) continue;
      const [block] = run.live.splice(o.index % run.live.length, 1);
      allocator.free(block!);
    } else {
      allocator.emptyCache();
    }
    check(run);
  }
  return run;
}

/** The blocks of a segment, from any of its blocks: prev/next link them in address order. */
function segmentBlocks(block: Block): Block[] {
  let first = block;
  while (first.prev) first = first.prev;
  const blocks: Block[] = [];
  for (let b: Block | null = first; b; b = b.next) blocks.push(b);
  return blocks;
}

function checkInvariants(run: Run, capBytes: number | undefined): void {
  const stats = run.allocator.stats;
  for (const name of STAT_ARRAY_NAMES) {
    for (const stat of stats[name]) {
      expect(stat.current, `${name}.current`).toBeGreaterThanOrEqual(0);
      expect(stat.peak, `${name}.peak`).toBeGreaterThanOrEqual(stat.current);
    }
    // the aggregate is the sum of the two pools
    expect(stats[name][0].current, `${name}: all = small + large`).toBe(stats[name][1].current + stats[name][2].current);
  }
  expect(run.allocator.allocatedBytes).toBeLessThanOrEqual(run.allocator.reservedBytes);
  expect(run.allocator.allocatedBytes).toBe(run.live.reduce((n, b) => n + b.size, 0));
  if (capBytes !== undefined) {
    // alloc_block checks the cap against the request's allocation size; with expandable segments the pages it
    // then maps (20 MiB each in the large pool) can overshoot the cap by less than one page, as in PyTorch.
    const overshoot = run.expandable ? run.allocator.config.largeSegmentSizeBytes : 0;
    expect(run.allocator.reservedBytes).toBeLessThan(capBytes + overshoot + 1);
  }
  if (run.expandable) return;
  // Without expandable segments, reserved is the sum of the cudaMalloc'd segments, and every segment is tiled by
  // its blocks exactly: the first starts at the segment, each ends where the next begins, the last at its end.
  expect(run.allocator.reservedBytes).toBe([...run.segments.values()].reduce((n, s) => n + s, 0));
  for (const block of run.live) {
    const blocks = segmentBlocks(block);
    const start = blocks[0]!.ptr;
    expect(run.segments.has(start), 'a segment begins at its first block').toBe(true);
    for (let i = 1; i < blocks.length; i++) expect(blocks[i]!.ptr).toBe(blocks[i - 1]!.ptr + blocks[i - 1]!.size);
    const last = blocks[blocks.length - 1]!;
    expect(last.ptr + last.size).toBe(start + run.segments.get(start)!);
    // two free neighbours are always merged (free_block's try_merge_blocks)
    for (let i = 1; i < blocks.length; i++) expect(blocks[i]!.allocated || blocks[i - 1]!.allocated).toBe(true);
  }
}

describe('caching allocator invariants on random programs', () => {
  it('keeps its stats consistent, its segments tiled and reserved under the cap after every call', () => {
    let calls = 0;
    fc.assert(
      fc.property(scenario, ({ conf, capBytes, ops }) => {
        execute(conf, capBytes, ops, (run) => {
          calls++;
          checkInvariants(run, capBytes);
        });
      }),
      { numRuns: RUNS },
    );
    console.log(`allocator invariants: ${RUNS} random programs, ${calls} allocator calls checked`);
  });

  it('gives every byte back after freeing everything and empty_cache()', () => {
    fc.assert(
      fc.property(scenario, ({ conf, capBytes, ops }) => {
        const run = execute(conf, capBytes, ops);
        for (const block of run.live.splice(0)) run.allocator.free(block);
        run.allocator.emptyCache();
        const stats = run.allocator.stats;
        for (const name of STAT_ARRAY_NAMES) expect(stats[name][0].current, name).toBe(0);
        if (!run.expandable) expect(run.segments.size).toBe(0);
      }),
      { numRuns: RUNS },
    );
    console.log(`allocator drain: ${RUNS} random programs freed and emptied to zero`);
  });

  it("gives the steady-state key (engine/train/steady-state.ts) the segments memory_snapshot() lists, block for block", () => {
    let checked = 0;
    fc.assert(
      fc.property(scenario, ({ conf, capBytes, ops }) => {
        const device = new SimulatedDevice(80 * GiB);
        execute(conf, capBytes, ops, (run) => {
          // The key's segments as it was first written, from segments() (the snapshot's SegmentInfo list); its first
          // part is the address space's state (where the next segment lands), read from the driver's model itself.
          const parts: string[] = [];
          for (const segment of run.allocator.segments()) {
            parts.push(`S${segment.address}:${segment.stream}:${segment.segment_type}:${segment.is_expandable ? 'e' : ''}`);
            for (const b of segment.blocks) parts.push(`${b.address}+${b.size}${b.state === 'active_allocated' ? `a${b.requested_size}` : b.state === 'active_pending_free' ? 'p' : ''}`);
          }
          expect(steadyStateKey(run.allocator, device, new Map()).split(' ').slice(1).join(' ')).toBe(parts.join(' '));
          checked++;
        });
      }),
      { numRuns: RUNS / 4 },
    );
    console.log(`steady-state key: ${checked} allocator states read as segments() lists them`);
  });

  it('is deterministic: the same program under the same settings makes the same trace', () => {
    fc.assert(
      fc.property(scenario, ({ conf, capBytes, ops }) => {
        expect(execute(conf, capBytes, ops).trace).toEqual(execute(conf, capBytes, ops).trace);
      }),
      { numRuns: RUNS / 4 },
    );
    console.log(`allocator determinism: ${RUNS / 4} random programs replayed twice`);
  });
});
