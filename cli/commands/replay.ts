/**
 * `memplan replay FILE`: replay a PyTorch memory snapshot through the simulated allocator, compare it event by
 * event with what PyTorch did, and show what other allocator settings would have reserved.
 */
import { InputError } from '../../engine/errors.ts';
import { formatSize } from '../../engine/allocator/format.ts';
import { readSnapshotBytes } from '../../engine/snapshot/snapshot.ts';
import { replaySnapshot, replayWhatIf } from '../../engine/snapshot/replay.ts';
import { parseByteCount, parseCommandArgs } from '../args.ts';
import { readUserFile } from '../files.ts';

const DEFAULT_WHAT_IFS = ['', 'expandable_segments:True', 'max_split_size_mb:128', 'roundup_power2_divisions:4'];

const usage = `Usage: memplan replay SNAPSHOT [options]

Replays a PyTorch memory snapshot (the pickle torch.cuda.memory._dump_snapshot() writes, gzipped or not,
or the same data as JSON) through memplan's simulated CUDA caching allocator and compares every segment
event with what PyTorch did.

Options:
  --memory-limit-bytes N   the cap torch.cuda.set_per_process_memory_fraction imposed (snapshots do not record it)
  --alloc-conf STRING      replay under this PYTORCH_CUDA_ALLOC_CONF instead of the snapshot's settings
  --what-if STRING         also replay under these settings (repeatable; default: a few common ones)
  --json                   print one JSON object`;

async function run(args: string[]): Promise<void> {
  const { values, positionals } = parseCommandArgs('replay', args, {
    'memory-limit-bytes': { type: 'string' },
    'alloc-conf': { type: 'string' },
    'what-if': { type: 'string', multiple: true },
    json: { type: 'boolean', default: false },
  });
  if (positionals.length !== 1) throw new InputError('memplan replay', 'expected exactly one snapshot file');
  const file = positionals[0]!;
  const memoryLimitBytes = parseByteCount('--memory-limit-bytes', values['memory-limit-bytes'] as string | undefined);
  const snapshot = readSnapshotBytes(readUserFile(file));
  const report = replaySnapshot(snapshot, { allocConf: values['alloc-conf'] as string | undefined, memoryLimitBytes });
  const whatIfConfs = (values['what-if'] as string[] | undefined) ?? DEFAULT_WHAT_IFS;
  const whatIf = whatIfConfs.map((conf) => replayWhatIf(snapshot, report.emptyCacheCalls, conf, { memoryLimitBytes }));

  if (values.json) {
    process.stdout.write(
      JSON.stringify({
        file,
        events: report.events,
        alloc_conf: report.allocConf,
        memory_limit_bytes: report.memoryLimitBytes,
        real_peak_allocated: report.realPeakAllocatedBytes,
        real_peak_reserved: report.realPeakReservedBytes,
        real_peak_requested: report.realPeakRequestedBytes,
        sim_peak_allocated: report.simPeakAllocatedBytes,
        sim_peak_reserved: report.simPeakReservedBytes,
        sim_peak_requested: report.simPeakRequestedBytes,
        real_segment_events: report.realSegmentEvents,
        segment_event_mismatches: report.segmentEventMismatches,
        first_mismatch: report.firstMismatch && {
          event_index: report.firstMismatch.eventIndex,
          real: report.firstMismatch.real,
          simulated: report.firstMismatch.simulated,
        },
        reserved_mismatch_events: report.reservedMismatchEvents,
        real_oom: report.realOom,
        sim_oom: report.simOom,
        empty_cache_calls: report.emptyCacheCalls.length,
        memory_stats: report.memoryStats,
        what_if: whatIf.map((w) => ({
          alloc_conf: w.allocConf,
          peak_reserved: w.peakReservedBytes,
          peak_allocated: w.peakAllocatedBytes,
          oom_at_event: w.oomAtEvent,
          num_alloc_retries: w.numAllocRetries,
        })),
      }) + '\n',
    );
    return;
  }
  const exact = report.segmentEventMismatches === 0 && report.simPeakReservedBytes === report.realPeakReservedBytes;
  const lines = [
    `${file}: ${report.events} trace events, ${report.realSegmentEvents} segment events`,
    `allocator settings: ${report.allocConf || '(PyTorch defaults)'}${report.memoryLimitBytes ? `, cap ${formatSize(report.memoryLimitBytes)}` : ''}`,
    '',
    `                 real          simulated`,
    `peak reserved    ${formatSize(report.realPeakReservedBytes).padEnd(14)}${formatSize(report.simPeakReservedBytes)}`,
    `peak allocated   ${formatSize(report.realPeakAllocatedBytes).padEnd(14)}${formatSize(report.simPeakAllocatedBytes)}`,
    `out of memory    ${(report.realOom ? 'yes' : 'no').padEnd(14)}${report.simOom ? 'yes' : 'no'}`,
    '',
    exact
      ? 'Every segment PyTorch created and released was reproduced exactly.'
      : `${report.segmentEventMismatches} segment events differ; first at event ${report.firstMismatch?.eventIndex}: real ${report.firstMismatch?.real}, simulated ${report.firstMismatch?.simulated}.`,
    report.emptyCacheCalls.length ? `empty_cache() calls found: ${report.emptyCacheCalls.length}` : '',
    '',
    'The same program under other allocator settings:',
    ...whatIf.map(
      (w) =>
        `  ${(w.allocConf || '(defaults)').padEnd(40)} peak reserved ${formatSize(w.peakReservedBytes)}${w.oomAtEvent !== null ? `, out of memory at event ${w.oomAtEvent}` : ''}`,
    ),
  ];
  process.stdout.write(lines.filter((l, i, a) => !(l === '' && a[i - 1] === '')).join('\n') + '\n');
}

export const replayCommand = {
  summary: 'replay a PyTorch memory snapshot through the simulated allocator and compare',
  usage,
  run,
};
