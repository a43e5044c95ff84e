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
