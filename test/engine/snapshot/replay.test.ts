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

interface TraceMeta {
  scenario: string;
  alloc_conf: string | null;
  memory_limit_bytes: number | null;
  total_memory: number;
  memory_stats: Record<string, number>;
  oom_message: string | null;
}

describe('recorded traces replay exactly', () => {
  it('has the recorded traces', () => {
    expect(names.length).toBeGreaterThanOrEqual(7);
  });

  for (const name of names) {
    it(name, () => {
      const meta = JSON.parse(readFileSync(new URL(`${name}.json`, dir), 'utf8')) as TraceMeta;
      const snapshot = readSnapshotBytes(readFileSync(new URL(`${name}.pickle.gz`, dir)));
      const report = replaySnapshot(snapshot, {
        allocConf: meta.alloc_conf ?? '',
        memoryLimitBytes: meta.memory_limit_bytes ?? undefined,
        totalGlobalMemBytes: meta.total_memory,
      });
      expect(report.firstMismatch).toBeNull();
      expect(report.segmentEventMismatches).toBe(0);
      expect(report.reservedMismatchEvents).toBe(0);
      expect(report.simOom).toBe(report.realOom);
      expect(report.realOom).toBe(meta.oom_message !== null);
      // The peaks torch.cuda.memory_stats() reported at the end of the real run.
      const stats = meta.memory_stats;
      expect(report.simPeakReservedBytes).toBe(stats['reserved_bytes.all.peak']);
      expect(report.simPeakAllocatedBytes).toBe(stats['allocated_bytes.all.peak']);
      expect(report.simPeakRequestedBytes).toBe(stats['requested_bytes.all.peak']);
      for (const key of ['num_alloc_retries', 'num_ooms', 'segment.all.current', 'reserved_bytes.all.current', 'allocated_bytes.all.current', 'inactive_split_bytes.all.current']) {
        expect(report.memoryStats[key], key).toBe(stats[key]);
      }
    });
  }
});

describe('what-if replay', () => {
  it('reproduces the recorded peak under the recorded settings', () => {
    const name = names.find((n) => n.startsWith('cnn')) ?? names[0]!;
    const meta = JSON.parse(readFileSync(new URL(`${name}.json`, dir), 'utf8')) as TraceMeta;
    const snapshot = readSnapshotBytes(readFileSync(new URL(`${name}.pickle.gz`, dir)));
    const report = replaySnapshot(snapshot, { allocConf: meta.alloc_conf ?? '', totalGlobalMemBytes: meta.total_memory });
    const same = replayWhatIf(snapshot, report.emptyCacheCalls, meta.alloc_conf ?? '', { totalGlobalMemBytes: meta.total_memory });
    expect(same.peakReservedBytes).toBe(report.realPeakReservedBytes);
    const expandable = replayWhatIf(snapshot, report.emptyCacheCalls, 'expandable_segments:True', { totalGlobalMemBytes: meta.total_memory });
    // With expandable segments every block splits at a 512-byte remainder, so each live block is exactly its
    // rounded size: allocated can only be lower than with the default's unsplit remainders.
    expect(expandable.peakAllocatedBytes).toBeLessThanOrEqual(same.peakAllocatedBytes);
    expect(expandable.peakReservedBytes).toBeGreaterThanOrEqual(expandable.peakAllocatedBytes);
    expect(expandable.peakReservedBytes % 2_097_152).toBe(0);
  });
});
