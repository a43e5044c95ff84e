/**
 * The recorded GPU traces (test/fixtures/traces, recorded with resources/measure/memplan_measure.py on an H100)
 * replay through the simulated allocator with every segment event reproduced, and the exact peaks PyTorch reported.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { readSnapshotBytes } from '../../../engine/snapshot/snapshot.ts';
import { replaySnapshot, replayWhatIf } from '../../../engine/snapshot/replay.ts';

const dir = new URL('../../fixtures/traces/', import.meta.url);
const names = readdirSync(dir)
  .filter((f) => f.endsWith('.pickle.gz'))
  .map((f) => f.replace(/\.pickle\.gz$/, ''))
  .sort();

/** The parts of a measurement (resources/measure/memplan_measure.py) the replay checks against. */
interface TraceMeta {
  alloc_conf: string | null;
  cap: { allowed_bytes: number | null };
  environment: { total_memory_bytes: number };
  peak_allocated_bytes: number;
  peak_reserved_bytes: number;
  peak_requested_bytes: number;
  /** At the end of the run (peaks in it are the last step's: the script resets them each step). */
  memory_stats: Record<string, number>;
  oom_message: string | null;
}

function load(name: string) {
  const meta = JSON.parse(readFileSync(new URL(`${name}.json`, dir), 'utf8')) as TraceMeta;
  const snapshot = readSnapshotBytes(readFileSync(new URL(`${name}.pickle.gz`, dir)));
  const options = {
    allocConf: meta.alloc_conf ?? '',
    memoryLimitBytes: meta.cap.allowed_bytes ?? undefined,
    totalGlobalMemBytes: meta.environment.total_memory_bytes,
  };
  return { meta, snapshot, options };
}

describe('recorded traces replay exactly', () => {
  it('has the recorded traces', () => {
    expect(names.length).toBeGreaterThanOrEqual(7);
  });

  for (const name of names) {
    it(name, () => {
      const { meta, snapshot, options } = load(name);
      const report = replaySnapshot(snapshot, options);
      expect(report.firstMismatch).toBeNull();
      expect(report.segmentEventMismatches).toBe(0);
      expect(report.reservedMismatchEvents).toBe(0);
      expect(report.simOom).toBe(report.realOom);
      expect(report.realOom).toBe(meta.oom_message !== null);
      // The peaks max_memory_allocated() and max_memory_reserved() reported over the whole real run.
      expect(report.simPeakReservedBytes).toBe(meta.peak_reserved_bytes);
      expect(report.realPeakReservedBytes).toBe(meta.peak_reserved_bytes);
      expect(report.simPeakAllocatedBytes).toBe(meta.peak_allocated_bytes);
      expect(report.simPeakRequestedBytes).toBe(meta.peak_requested_bytes);
      const stats = meta.memory_stats;
      for (const key of ['num_alloc_retries', 'num_ooms', 'segment.all.current', 'reserved_bytes.all.current', 'allocated_bytes.all.current', 'inactive_split_bytes.all.current']) {
        expect(report.memoryStats[key], key).toBe(stats[key]);
      }
    });
  }
});

describe('settings a recorded run ran with', () => {
  it('replay as its PyTorch ran them: a per_process_memory_fraction is the cap it set; keys of other versions are ignored', () => {
    // oom_under_cap ran under set_per_process_memory_fraction: the same cap given as the recorded setting instead
    const { meta, snapshot, options } = load('oom_under_cap');
    const total = meta.environment.total_memory_bytes;
    const fraction = meta.cap.allowed_bytes! / total;
    const capped = replaySnapshot(snapshot, options);
    const recorded = replaySnapshot(
      { ...snapshot, allocatorSettings: { PYTORCH_CUDA_ALLOC_CONF: `per_process_memory_fraction:${fraction},throw_on_cudamalloc_oom:True,pinned_num_register_threads:256` } },
      { totalGlobalMemBytes: total },
    );
    expect(recorded.memoryLimitBytes).toBe(Math.floor(fraction * total));
    expect(Math.abs(recorded.memoryLimitBytes! - meta.cap.allowed_bytes!)).toBeLessThanOrEqual(1);
    expect(recorded.allocConf).toBe(`per_process_memory_fraction:${fraction}`);
    expect(recorded.firstMismatch).toBeNull();
    expect(recorded.realOom).toBe(true);
    expect(recorded.simOom).toBe(true);
    expect(recorded.simPeakReservedBytes).toBe(capped.simPeakReservedBytes);
    // settings typed for the replay (--alloc-conf, --what-if) are read as PyTorch 2.11 reads them: a typo is said,
    // and a fraction is a cap there too
    expect(() => replayWhatIf(snapshot, capped.emptyCacheCalls, 'expandable_segment:True', { totalGlobalMemBytes: total })).toThrow(/unknown allocator setting "expandable_segment"/);
    expect(() => replaySnapshot(snapshot, { allocConf: 'throw_on_cudamalloc_oom:True', totalGlobalMemBytes: total })).toThrow(/unknown allocator setting/);
    expect(replaySnapshot(snapshot, { allocConf: `per_process_memory_fraction:${fraction}`, totalGlobalMemBytes: total }).memoryLimitBytes).toBe(Math.floor(fraction * total));
    // a plan's settings are PyTorch 2.11's and give the cap as memory_limit_bytes (test/engine/allocator/config.test.ts)
    expect(() => replaySnapshot({ ...snapshot, allocatorSettings: { PYTORCH_CUDA_ALLOC_CONF: 'backend:cudaMallocAsync' } }, { totalGlobalMemBytes: total })).toThrow(/cudaMallocAsync/);
  });
});

describe('what-if replay', () => {
  it('reproduces the recorded peak under the recorded settings', () => {
    const name = names.find((n) => n.startsWith('cnn')) ?? names[0]!;
    const { meta, snapshot, options } = load(name);
    const report = replaySnapshot(snapshot, options);
    const same = replayWhatIf(snapshot, report.emptyCacheCalls, meta.alloc_conf ?? '', options);
    expect(same.peakReservedBytes).toBe(report.realPeakReservedBytes);
    const expandable = replayWhatIf(snapshot, report.emptyCacheCalls, 'expandable_segments:True', options);
    // With expandable segments every block splits at a 512-byte remainder, so each live block is exactly its
    // rounded size: allocated can only be lower than with the default's unsplit remainders.
    expect(expandable.peakAllocatedBytes).toBeLessThanOrEqual(same.peakAllocatedBytes);
    expect(expandable.peakReservedBytes).toBeGreaterThanOrEqual(expandable.peakAllocatedBytes);
    expect(expandable.peakReservedBytes % 2_097_152).toBe(0);
  });
});
