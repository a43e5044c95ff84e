import { describe, expect, it } from 'vitest';
import { CachingAllocator, OutOfMemoryError, roundupPower2NextDivision, type TraceEvent } from '../../../engine/allocator/caching-allocator.ts';
import { defaultAllocatorConfig, parseAllocatorConf } from '../../../engine/allocator/config.ts';
import { SimulatedDevice } from '../../../engine/allocator/device-memory.ts';
import { formatSize, memorySummary } from '../../../engine/allocator/format.ts';

const MiB = 1_048_576;
const GiB = 1024 * MiB;

function make(conf = '', options: { memoryLimitBytes?: number; capacityBytes?: number } = {}) {
  const events: TraceEvent[] = [];
  const allocator = new CachingAllocator({
    config: conf ? parseAllocatorConf(conf) : defaultAllocatorConfig(),
    device: new SimulatedDevice(options.capacityBytes),
    totalGlobalMemBytes: 80 * GiB,
    memoryLimitBytes: options.memoryLimitBytes,
    onTrace: (action, addr, size, stream) => events.push({ action, addr, size, stream }),
  });
  const segmentEvents = () => events.filter((e) => e.action.startsWith('segment') || e.action === 'oom').map((e) => `${e.action}:${e.size}`);
  return { allocator, events, segmentEvents };
}

describe('round_size and segment sizes (CUDACachingAllocator.cpp)', () => {
  it('rounds to 512 bytes with at least 512', () => {
    const { allocator } = make();
    expect(allocator.roundSize(1)).toBe(512);
    expect(allocator.roundSize(512)).toBe(512);
    expect(allocator.roundSize(513)).toBe(1024);
  });

  it('sizes new segments as get_allocation_size does', () => {
    const { allocator } = make();
    expect(allocator.getAllocationSize(MiB)).toBe(2 * MiB); // small pool: 2 MiB
    expect(allocator.getAllocationSize(MiB + 512)).toBe(20 * MiB); // 1-10 MiB: 20 MiB
    expect(allocator.getAllocationSize(10 * MiB)).toBe(10 * MiB); // from 10 MiB: rounded to 2 MiB
    expect(allocator.getAllocationSize(11 * MiB)).toBe(12 * MiB);
  });

  it('rounds to power-of-two divisions when configured', () => {
    // PyTorch's comment: 1200 with 4 divisions between 1024 and 2048 rounds to 1280.
    expect(roundupPower2NextDivision(1200, 4)).toBe(1280);
    expect(roundupPower2NextDivision(2048, 4)).toBe(2048);
    const { allocator } = make('roundup_power2_divisions:4');
    expect(allocator.roundSize(5 * MiB + 1)).toBe(6 * MiB);
    expect(allocator.roundSize(1200)).toBe(1536); // 1200 <= 512*4: plain 512 rounding
  });

  it('parses the list form of roundup_power2_divisions', () => {
    const c = parseAllocatorConf('roundup_power2_divisions:[64:8,256:4,>:1]');
    // index 7 (128-256 MB) lies between two keys: PyTorch leaves it at 0
    expect(c.roundupPower2Divisions.slice(0, 10)).toEqual([8, 8, 8, 8, 8, 8, 8, 0, 4, 1]);
  });
});

describe('caching, splitting and merging', () => {
  it('a first 4 MiB request reserves a 20 MiB segment (measured on the H100)', () => {
    const { allocator, segmentEvents } = make();
    allocator.malloc(4 * MiB);
    expect(segmentEvents()).toEqual([`segment_alloc:${20 * MiB}`]);
    expect(allocator.allocatedBytes).toBe(4 * MiB);
    expect(allocator.reservedBytes).toBe(20 * MiB);
    expect(allocator.memoryStats()['inactive_split_bytes.all.current']).toBe(16 * MiB);
  });

  it('packs small requests into 2 MiB segments and reuses freed blocks', () => {
    const { allocator, segmentEvents } = make();
    const blocks = Array.from({ length: 4 }, () => allocator.malloc(512 * 1024));
    expect(segmentEvents()).toEqual([`segment_alloc:${2 * MiB}`]);
    allocator.malloc(1000); // segment full: a new one
    expect(segmentEvents()).toHaveLength(2);
    const freedPtr = blocks[1]!.ptr;
    allocator.free(blocks[1]!);
    const again = allocator.malloc(512 * 1024);
    expect(again.ptr).toBe(freedPtr);
    expect(segmentEvents()).toHaveLength(2);
  });

  it('gives a large request the whole block when at most 1 MiB would remain (strictly more splits)', () => {
    const { allocator } = make();
    const big = allocator.malloc(12 * MiB);
    allocator.free(big);
    const b = allocator.malloc(11 * MiB); // remainder exactly 1 MiB: not split
    expect(b.size).toBe(12 * MiB);
    expect(allocator.allocatedBytes).toBe(12 * MiB);
    expect(allocator.memoryStats()['requested_bytes.all.current']).toBe(11 * MiB);
  });

  it('best fit takes the smallest block that fits, whatever its size', () => {
    const { allocator, segmentEvents } = make();
    const a = allocator.malloc(100 * MiB);
    const b = allocator.malloc(30 * MiB);
    const bPtr = b.ptr;
    allocator.free(a);
    allocator.free(b);
    const c = allocator.malloc(25 * MiB);
    expect(c.ptr).toBe(bPtr); // the 30 MiB segment, split
    expect(segmentEvents()).toEqual([`segment_alloc:${100 * MiB}`, `segment_alloc:${30 * MiB}`]);
  });

  it('merges freed neighbours so the segment can be released whole', () => {
    const { allocator, segmentEvents } = make();
    const a = allocator.malloc(2 * MiB);
    const b = allocator.malloc(3 * MiB);
    const c = allocator.malloc(4 * MiB); // all three in one 20 MiB segment
    expect(segmentEvents()).toEqual([`segment_alloc:${20 * MiB}`]);
    allocator.free(b);
    allocator.free(a);
    allocator.free(c);
    expect(allocator.memoryStats()['inactive_split.all.current']).toBe(0);
    allocator.emptyCache();
    expect(segmentEvents()).toEqual([`segment_alloc:${20 * MiB}`, `segment_free:${20 * MiB}`]);
    expect(allocator.reservedBytes).toBe(0);
  });

  it('empty_cache keeps segments that hold a live block', () => {
    const { allocator } = make();
    const a = allocator.malloc(2 * MiB);
    allocator.malloc(3 * MiB);
    allocator.free(a);
    allocator.emptyCache();
    expect(allocator.reservedBytes).toBe(20 * MiB);
  });
});

describe('the memory cap, release-and-retry and the OOM', () => {
  it('releases cached segments and retries when the cap is hit', () => {
    const { allocator, segmentEvents } = make('', { memoryLimitBytes: 100 * MiB });
    const a = allocator.malloc(60 * MiB);
    allocator.free(a);
    allocator.malloc(70 * MiB); // 60 cached + 70 > 100: release the 60, retry
    expect(segmentEvents()).toEqual([`segment_alloc:${60 * MiB}`, `segment_free:${60 * MiB}`, `segment_alloc:${70 * MiB}`]);
    expect(allocator.memoryStats()['num_alloc_retries']).toBe(1);
  });

  it('raises PyTorch\'s OOM message, printing the segment size', () => {
    const { allocator } = make('', { memoryLimitBytes: 100 * MiB });
    allocator.malloc(90 * MiB);
    let error: unknown;
    try {
      allocator.malloc(3 * MiB); // needs a 20 MiB segment
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(OutOfMemoryError);
    expect((error as Error).message).toMatch(/^CUDA out of memory\. Tried to allocate 20\.00 MiB\. GPU 0 has a total capacity of 80\.00 GiB/);
    expect((error as Error).message).toContain('100.00 MiB allowed; Of the allocated memory 90.00 MiB is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated.');
    expect(allocator.memoryStats()['num_ooms']).toBe(1);
  });

  it('runs out when the device has no room, without a cap', () => {
    const { allocator } = make('', { capacityBytes: 50 * MiB });
    allocator.malloc(40 * MiB);
    expect(() => allocator.malloc(20 * MiB)).toThrow(OutOfMemoryError);
  });
});

describe('max_split_size', () => {
  it('never splits oversize blocks nor gives them to small requests', () => {
    const { allocator, segmentEvents } = make('max_split_size_mb:64');
    const big = allocator.malloc(100 * MiB);
    allocator.free(big);
    allocator.malloc(30 * MiB); // may not take the 100 MiB block
    expect(segmentEvents()).toEqual([`segment_alloc:${100 * MiB}`, `segment_alloc:${30 * MiB}`]);
    const b = allocator.malloc(90 * MiB); // within 20 MiB of 100: takes it whole
    expect(b.size).toBe(100 * MiB);
    expect(allocator.memoryStats()['oversize_allocations.current']).toBe(1);
  });
});

describe('expandable segments', () => {
  it('maps 20 MiB pages of one segment instead of new segments', () => {
    const { allocator, segmentEvents } = make('expandable_segments:True');
    allocator.malloc(30 * MiB);
    allocator.malloc(30 * MiB);
    expect(segmentEvents()).toEqual([`segment_map:${40 * MiB}`, `segment_map:${20 * MiB}`]);
    expect(allocator.reservedBytes).toBe(60 * MiB);
    expect(allocator.memoryStats()['segment.all.current']).toBe(0);
  });

  it('unmaps free pages on empty_cache', () => {
    const { allocator, segmentEvents } = make('expandable_segments:True');
    const a = allocator.malloc(30 * MiB);
    allocator.malloc(30 * MiB);
    allocator.free(a);
    allocator.emptyCache();
    // [0, 30) free, [30, 60) live: the page [0, 20) is wholly free
    expect(segmentEvents().at(-1)).toBe(`segment_unmap:${20 * MiB}`);
    expect(allocator.reservedBytes).toBe(40 * MiB);
  });
});

describe('large_segment_size_mb (Note [large_segment_size_mb])', () => {
  it('an odd size is the segment of 1-10 MiB requests, as get_allocation_size returns large_segment_size()', () => {
    const { allocator, segmentEvents } = make('large_segment_size_mb:11');
    expect(allocator.getAllocationSize(MiB + 512)).toBe(11 * MiB);
    expect(allocator.getAllocationSize(10 * MiB)).toBe(10 * MiB); // from 10 MiB: rounded to 2 MiB, as before
    allocator.malloc(4 * MiB);
    allocator.malloc(4 * MiB); // split off the first segment's remaining 7 MiB
    allocator.malloc(4 * MiB); // 3 MiB left there: a second segment
    expect(segmentEvents()).toEqual([`segment_alloc:${11 * MiB}`, `segment_alloc:${11 * MiB}`]);
    expect(allocator.reservedBytes).toBe(22 * MiB);
  });

  it('sets the default max_non_split_rounding_mb: an oversize block serves a request within 11 MiB, not 20', () => {
    // max_split_size_mb 12 is allowed with an 11 MiB large segment (and refused without it)
    const eleven = make('large_segment_size_mb:11,max_split_size_mb:12');
    eleven.allocator.free(eleven.allocator.malloc(46 * MiB));
    eleven.allocator.malloc(30 * MiB); // the cached 46 MiB block is 16 MiB too large: a new segment
    expect(eleven.segmentEvents()).toEqual([`segment_alloc:${46 * MiB}`, `segment_alloc:${30 * MiB}`]);
    const twenty = make('max_split_size_mb:20');
    twenty.allocator.free(twenty.allocator.malloc(46 * MiB));
    twenty.allocator.malloc(30 * MiB); // within 20 MiB: the cached block serves it
    expect(twenty.segmentEvents()).toEqual([`segment_alloc:${46 * MiB}`]);
  });

  it('is the page of the large pool with expandable segments', () => {
    const { allocator, segmentEvents } = make('expandable_segments:True,large_segment_size_mb:12');
    allocator.malloc(4 * MiB);
    allocator.malloc(30 * MiB);
    expect(segmentEvents()).toEqual([`segment_map:${12 * MiB}`, `segment_map:${24 * MiB}`]);
  });
});

describe('formatting', () => {
  it('formats sizes as c10 format_size', () => {
    expect(formatSize(1024)).toBe('1024 bytes');
    expect(formatSize(1536)).toBe('1.50 KiB');
    expect(formatSize(20 * MiB)).toBe('20.00 MiB');
    expect(formatSize(GiB + 1)).toBe('1.00 GiB');
  });

  it('lays out memory_summary as torch.cuda.memory_summary', () => {
    const { allocator } = make();
    allocator.malloc(4 * MiB);
    const text = memorySummary(allocator.stats);
    const lines = text.trimEnd().split('\n');
    expect(lines.every((l) => l.length === 77)).toBe(true);
    expect(text).toContain('| Allocated memory      |   4096 KiB |   4096 KiB |   4096 KiB |      0 B   |');
    expect(text).toContain('| GPU reserved memory   |  20480 KiB |  20480 KiB |  20480 KiB |      0 B   |');
  });
});
