/**
 * `memplan replay FILE`: replay a PyTorch memory snapshot through the simulated allocator, compare it event by
 * event with what PyTorch did, and show what other allocator settings would have reserved.
 */
import { DEFAULT_WHAT_IFS, InputError, formatSize, readSnapshotBytes, replay, stringifyResult, type ReplayResult } from '../../engine/index.ts';
import { parseByteCount, parseCommandArgs } from '../args.ts';
import { readUserFile } from '../files.ts';

const usage = `Usage: memplan replay SNAPSHOT [options]

Replays a PyTorch memory snapshot (the pickle torch.cuda.memory._dump_snapshot() writes, gzipped or not,
or the same data as JSON) through memplan's simulated CUDA caching allocator and compares every segment
event with what PyTorch did.

Options:
  --memory-limit-bytes N   the cap torch.cuda.set_per_process_memory_fraction imposed (snapshots do not record it)
  --alloc-conf STRING      replay under this PYTORCH_CUDA_ALLOC_CONF instead of the snapshot's settings
  --what-if STRING         also replay under these settings (repeatable; default: a few common ones)
  --json                   print one JSON object: the replay result (engine/result/replay.ts)`;

function text(file: string, r: ReplayResult): string {
  const exact = r.segment_event_mismatches === 0 && r.sim_peak_reserved_bytes === r.real_peak_reserved_bytes;
  const lines = [
    `${file}: ${r.events} trace events, ${r.real_segment_events} segment events`,
    `allocator settings: ${r.alloc_conf || '(PyTorch defaults)'}${r.memory_limit_bytes ? `, cap ${formatSize(r.memory_limit_bytes)}` : ''}`,
    '',
    `                 real          simulated`,
    `peak reserved    ${formatSize(r.real_peak_reserved_bytes).padEnd(14)}${formatSize(r.sim_peak_reserved_bytes)}`,
    `peak allocated   ${formatSize(r.real_peak_allocated_bytes).padEnd(14)}${formatSize(r.sim_peak_allocated_bytes)}`,
    `out of memory    ${(r.real_oom ? 'yes' : 'no').padEnd(14)}${r.sim_oom ? 'yes' : 'no'}`,
    '',
    exact
      ? 'Every segment PyTorch created and released was reproduced exactly.'
      : `${r.segment_event_mismatches} segment events differ; first at event ${r.first_mismatch?.event_index}: real ${r.first_mismatch?.real}, simulated ${r.first_mismatch?.simulated}.`,
    r.empty_cache_calls.length ? `empty_cache() calls found: ${r.empty_cache_calls.length}` : '',
    '',
    'The same program under other allocator settings:',
    ...r.what_if.map(
      (w) => `  ${(w.alloc_conf || '(defaults)').padEnd(40)} peak reserved ${formatSize(w.peak_reserved_bytes)}${w.oom_at_event !== null ? `, out of memory at event ${w.oom_at_event}` : ''}`,
    ),
  ];
  return lines.filter((l, i, a) => !(l === '' && a[i - 1] === '')).join('\n') + '\n';
}

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
  const r = replay(snapshot, {
    allocConf: values['alloc-conf'] as string | undefined,
    memoryLimitBytes,
    whatIf: (values['what-if'] as string[] | undefined) ?? DEFAULT_WHAT_IFS,
  });
  process.stdout.write(values.json ? stringifyResult(r) + '\n' : text(file, r));
}

export const replayCommand = {
  summary: 'replay a PyTorch memory snapshot through the simulated allocator and compare',
  usage,
  run,
};
