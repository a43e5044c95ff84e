/**
 * A PyTorch memory snapshot: what `torch.cuda.memory._snapshot()` returns and `_dump_snapshot()` pickles
 * (the file pytorch.org/memory_viz loads). memplan reads its trace (`device_traces`) and allocator settings.
 * Accepts the pickle (optionally gzipped) or the same data as JSON.
 */
import { InputError } from '../errors.ts';
import type { TraceAction } from '../allocator/caching-allocator.ts';
import { maybeGunzipSteps } from './gzip.ts';
import { PickleError, readPickleSteps } from './pickle.ts';

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

/**
 * Bounds on what a snapshot may make the engine do, so a huge or hostile file ends in a message, not a frozen or
 * crashed worker. A day-long recording of a large model is a few million events and a few hundred MB.
 */
export const MAX_SNAPSHOT_DECOMPRESSED_BYTES = 2 * 1024 * 1024 * 1024 - 1; // bytes: the largest Uint8Array to count on
export const MAX_TRACE_EVENTS = 50_000_000; // trace entries replayed (about 40 bytes of memory each)
/** Trace entries checked between two yields of `parseSnapshotSteps`. */
const EVENTS_PER_STEP = 200_000;

/** Where reading a snapshot is: the stage and the fraction of that stage done. */
export interface SnapshotReadProgress {
  stage: 'decompress' | 'parse' | 'trace';
  fraction: number;
}

/** Reads a snapshot file's bytes: gzip or not, pickle or JSON. */
export function readSnapshotBytes(bytes: Uint8Array): MemorySnapshot {
  const steps = readSnapshotSteps(bytes);
  for (;;) {
    const next = steps.next();
    if (next.done) return next.value;
  }
}

/** `readSnapshotBytes` in steps (the app's worker shows progress and sees a cancel between them). */
export function* readSnapshotSteps(bytes: Uint8Array): Generator<SnapshotReadProgress, MemorySnapshot, void> {
  const unzip = maybeGunzipSteps(bytes, MAX_SNAPSHOT_DECOMPRESSED_BYTES);
  let raw: Uint8Array;
  for (;;) {
    const next = unzip.next();
    if (next.done) {
      raw = next.value;
      break;
    }
    yield { stage: 'decompress', fraction: next.value };
  }
  if (raw.length > MAX_SNAPSHOT_DECOMPRESSED_BYTES) {
    throw new InputError('snapshot', `the file is ${raw.length} bytes; memplan reads snapshots of at most ${MAX_SNAPSHOT_DECOMPRESSED_BYTES} bytes`);
  }
  let value: unknown;
  if (raw.length > 0 && (raw[0] === 0x7b /* { */ || raw[0] === 0x20 || raw[0] === 0x0a)) {
    try {
      value = JSON.parse(new TextDecoder().decode(raw));
    } catch (error) {
      throw new InputError('snapshot', `not valid JSON: ${(error as Error).message}`);
    }
  } else {
    const pickle = readPickleSteps(raw);
    try {
      for (;;) {
        const next = pickle.next();
        if (next.done) {
          value = next.value;
          break;
        }
        yield { stage: 'parse', fraction: next.value / raw.length };
      }
    } catch (error) {
      if (error instanceof PickleError) throw new InputError('snapshot', error.message);
      throw error;
    }
  }
  return yield* parseSnapshotSteps(value);
}

/** Checks the shape of a snapshot value and extracts the trace. */
export function parseSnapshot(value: unknown): MemorySnapshot {
  const steps = parseSnapshotSteps(value);
  for (;;) {
    const next = steps.next();
    if (next.done) return next.value;
  }
}

function* parseSnapshotSteps(value: unknown): Generator<SnapshotReadProgress, MemorySnapshot, void> {
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
  if (events.length > MAX_TRACE_EVENTS) {
    throw new InputError(`snapshot.device_traces[${device}]`, `has ${events.length} events; memplan replays at most ${MAX_TRACE_EVENTS}`);
  }
  const trace: SnapshotTraceEvent[] = [];
  for (let i = 0; i < events.length; i++) {
    if (i % EVENTS_PER_STEP === EVENTS_PER_STEP - 1) yield { stage: 'trace', fraction: i / events.length };
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
