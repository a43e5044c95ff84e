/**
 * `memplan replay FILE`: replay a PyTorch memory snapshot through the simulated allocator, compare it event by
 * event with what PyTorch did, and show what other allocator settings would have reserved.
 */
import { DEFAULT_WHAT_IFS, InputError, formatSize, readSnapshotBytes, replay, stringifyResult, type ReplayResult } from '../../engine/index.ts';
import { parseCommandArgs, parseMemoryCap } from '../args.ts';
import { readUserFile } from '../files.ts';

const usage = `Usage: memplan replay SNAPSHOT [options]

Replays a PyTorch memory snapshot (the pickle torch.cuda.memory._dump_snapshot() writes, gzipped or not,
or the same data as JSON) through memplan's simulated CUDA caching allocator and compares every segment
event with what PyTorch did.

Options:
  --memory-limit SIZE      the cap torch.cuda.set_per_process_memory_fraction(F) imposed, F x total_memory
                           (snapshots do not record it), e.g. --memory-limit 4601151488 or 40GiB;
                           --memory-limit-bytes is the same flag
  --alloc-conf STRING      replay under this PYTORCH_CUDA_ALLOC_CONF instead of the snapshot's settings
  --what-if STRING         also replay under these settings (repeatable; default: a few common ones)
  --json                   print one JSON object: the replay result (engine/result/replay.ts)`;

/** The replay's settings and, for each what-if, whether it is the same run (then it repeats the table's numbers). */
function whatIfLabel(r: ReplayResult, conf: string): string {
  const name = conf || '(PyTorch defaults)';
  return conf === r.alloc_conf ? `${name} [as replayed]` : name;
}

/** Note [A cap the replay was not given] in words: what the trace shows, the cap's range, and how to pass it. */
function likelyCapText(file: string, cap: NonNullable<ReplayResult['likely_cap']>): string[] {
  return [
    `The real run was most likely capped: its out-of-memory error at event ${cap.oom_event} had room on the device, so a`,
    `memory cap refused it (torch.cuda.set_per_process_memory_fraction; snapshots do not record it). The cap was at`,
    `least ${formatSize(cap.at_least_bytes)} (${cap.at_least_bytes} bytes) and below ${formatSize(cap.below_bytes)} (${cap.below_bytes} bytes).`,
    ...(cap.retry_release_event !== null
      ? [`The segments released just before it (event ${cap.retry_release_event}) are its release-and-retry, not an empty_cache() call.`]
      : []),
    'Pass the cap to compare the run as it ran:',
    `  memplan replay ${file} --memory-limit <F x total_memory, in bytes>`,
  ];
}

function text(file: string, r: ReplayResult): string {
  const exact = r.segment_event_mismatches === 0 && r.sim_peak_reserved_bytes === r.real_peak_reserved_bytes;
  const cap = r.likely_cap ?? null;
  const calls = r.empty_cache_calls.filter((i) => i !== cap?.retry_release_event).length;
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
    ...(cap ? likelyCapText(file, cap) : []),
    calls ? `empty_cache() calls found: ${calls}` : '',
    '',
    'The same program under other allocator settings (each allocation, free and out-of-memory error of the trace):',
    ...r.what_if.map(
      (w) => `  ${whatIfLabel(r, w.alloc_conf).padEnd(40)} peak reserved ${formatSize(w.peak_reserved_bytes)}${w.oom_at_event !== null ? `, out of memory at event ${w.oom_at_event}` : ''}`,
    ),
  ];
  return lines.filter((l, i, a) => !(l === '' && a[i - 1] === '')).join('\n') + '\n';
}

async function run(args: string[]): Promise<void> {
  const { values, positionals } = parseCommandArgs('replay', args, {
    'memory-limit': { type: 'string' },
    'memory-limit-bytes': { type: 'string' },
    'alloc-conf': { type: 'string' },
    'what-if': { type: 'string', multiple: true },
    json: { type: 'boolean', default: false },
  });
  if (positionals.length !== 1) throw new InputError('memplan replay', 'expected exactly one snapshot file');
  const file = positionals[0]!;
  if (values['memory-limit'] !== undefined && values['memory-limit-bytes'] !== undefined) {
    throw new InputError('--memory-limit', 'given twice (--memory-limit and --memory-limit-bytes are the same flag)');
  }
  const limitFlag = values['memory-limit-bytes'] !== undefined ? '--memory-limit-bytes' : '--memory-limit';
  const memoryLimitBytes = parseMemoryCap(limitFlag, (values['memory-limit'] ?? values['memory-limit-bytes']) as string | undefined);
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
