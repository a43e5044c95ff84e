/**
 * A PyTorch memory snapshot: what `torch.cuda.memory._snapshot()` returns and `_dump_snapshot()` pickles
 * (the file pytorch.org/memory_viz loads). memplan reads its trace (`device_traces`) and allocator settings.
 * Accepts the pickle (optionally gzipped) or the same data as JSON.
 */
import { InputError } from '../errors.ts';
import type { TraceAction } from '../allocator/caching-allocator.ts';
import { maybeGunzip } from './gzip.ts';
import { PickleError, readPickle } from './pickle.ts';

export interface SnapshotTraceEvent {
  action: TraceAction;
  /** Address (0 for oom). */
  addr: number;
  size: number;
  stream: number;
  /** For `oom`: the free device memory cudaMemGetInfo reported. */
  deviceFree: number;
}

export interface MemorySnapshot {
  /** Trace of the device that has one (the first, if several). */
  trace: SnapshotTraceEvent[];
  device: number;
  /** `allocator_settings` as recorded (PyTorch >= 2.5); {} when absent. */
  allocatorSettings: Record<string, unknown>;
  /** Segments alive when the snapshot was taken. */
  segmentCount: number;
}

const REPLAYED_ACTIONS = new Set<string>([
  'alloc',
  'free_requested',
  'free_completed',
  'segment_alloc',
  'segment_free',
  'segment_map',
  'segment_unmap',
  'oom',
]);

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Map) && !(value instanceof Uint8Array);
}

/** Reads a snapshot file's bytes: gzip or not, pickle or JSON. */
export function readSnapshotBytes(bytes: Uint8Array): MemorySnapshot {
  const raw = maybeGunzip(bytes);
  let value: unknown;
  if (raw.length > 0 && (raw[0] === 0x7b /* { */ || raw[0] === 0x20 || raw[0] === 0x0a)) {
    try {
      value = JSON.parse(new TextDecoder().decode(raw));
    } catch (error) {
      throw new InputError('snapshot', `not valid JSON: ${(error as Error).message}`);
    }
  } else {
    try {
      value = readPickle(raw);
    } catch (error) {
      if (error instanceof PickleError) throw new InputError('snapshot', error.message);
      throw error;
    }
  }
  return parseSnapshot(value);
}

/** Checks the shape of a snapshot value and extracts the trace. */
export function parseSnapshot(value: unknown): MemorySnapshot {
  if (!isRecord(value)) throw new InputError('snapshot', 'expected a dictionary with "segments" and "device_traces" (a PyTorch memory snapshot)');
  const deviceTraces = value['device_traces'];
  if (!Array.isArray(deviceTraces)) {
    throw new InputError(
      'snapshot.device_traces',
      'missing: record the snapshot with torch.cuda.memory._record_memory_history(enabled="all") before the first CUDA allocation',
    );
  }
  let device = deviceTraces.findIndex((t) => Array.isArray(t) && t.length > 0);
  if (device < 0) throw new InputError('snapshot.device_traces', 'no trace events: was _record_memory_history(enabled="all") on?');
  const events = deviceTraces[device] as unknown[];
  const trace: SnapshotTraceEvent[] = [];
  for (let i = 0; i < events.length; i++) {
    const e = events[i];
    const where = `snapshot.device_traces[${device}][${i}]`;
    if (!isRecord(e)) throw new InputError(where, 'expected a trace entry (a dictionary)');
    const action = e['action'];
    if (typeof action !== 'string') throw new InputError(`${where}.action`, 'expected a string');
    if (!REPLAYED_ACTIONS.has(action)) continue; // 'snapshot', 'user_defined': markers, no memory
    const size = e['size'];
    if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0) {
      throw new InputError(`${where}.size`, `expected a non-negative whole number of bytes, got ${String(size)}`);
    }
    const addr = action === 'oom' ? 0 : e['addr'];
    if (typeof addr !== 'number' || !Number.isSafeInteger(addr) || addr < 0) {
      throw new InputError(`${where}.addr`, `expected an address (a non-negative whole number), got ${String(addr)}`);
    }
    const stream = typeof e['stream'] === 'number' ? e['stream'] : 0;
    const deviceFree = typeof e['device_free'] === 'number' ? e['device_free'] : 0;
    trace.push({ action: action as TraceAction, addr, size, stream, deviceFree });
  }
  const settings = value['allocator_settings'];
  const segments = value['segments'];
  return {
    trace,
    device,
    allocatorSettings: isRecord(settings) ? settings : {},
    segmentCount: Array.isArray(segments) ? segments.length : 0,
  };
}

/**
 * The PYTORCH_CUDA_ALLOC_CONF the snapshot was recorded under. PyTorch 2.11 records the string itself
 * (`allocator_settings.PYTORCH_CUDA_ALLOC_CONF`) next to the parsed values; older snapshots only the values.
 */
export function allocatorConfFromSettings(settings: Record<string, unknown>): string {
  const recorded = settings['PYTORCH_CUDA_ALLOC_CONF'];
  if (typeof recorded === 'string') return recorded;
  const parts: string[] = [];
  if (settings['expandable_segments'] === true) parts.push('expandable_segments:True');
  const maxSplit = settings['max_split_size'];
  if (typeof maxSplit === 'number' && maxSplit > 0 && maxSplit < 2 ** 53) parts.push(`max_split_size_mb:${maxSplit / 1_048_576}`);
  const gc = settings['garbage_collection_threshold'];
  if (typeof gc === 'number' && gc > 0) parts.push(`garbage_collection_threshold:${gc}`);
  const divisions = settings['roundup_power2_divisions'];
  // {"1": d0, "2": d1, ..., "32768": d15}: one entry per interval, keyed by its start in MB
  if (isRecord(divisions) && Object.values(divisions).some((v) => typeof v === 'number' && v !== 0)) {
    parts.push(`roundup_power2_divisions:[${Object.entries(divisions).map(([k, v]) => `${k}:${String(v)}`).join(',')}]`);
  }
  return parts.join(',');
}
