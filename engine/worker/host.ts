/**
 * The engine's side of the worker protocol (protocol.ts): runs each request and answers it. It knows no DOM and no
 * Node: the renderer's `engine.worker.ts` wires `self.onmessage` to `handle` and gives it the GPU catalog and a way
 * to fetch the cuDNN workspace table; tests call `handle` directly.
 *
 * Long requests pause between units of work (trials, advice variants, replay stages) by yielding to the event loop,
 * so that a `cancel` message is handled while they run; at each pause a cancelled request answers `cancelled` and
 * stops. A new request of the same kind supersedes a running one (its answers would be dropped as stale anyway):
 * the older stops at its next pause and answers `cancelled`.
 */
import { InputError } from '../errors.ts';
import { parseGpuCatalog, type GpuCatalog } from '../gpu/catalog.ts';
import { deviceFor, planGpu, planNeedsConvTable, type Device } from '../gpu/device.ts';
import { safeParsePlan } from '../plan/parse.ts';
import type { Plan } from '../plan/schema.ts';
import { issueOf } from '../plan/issues.ts';
import { adviseSteps } from '../search/advice.ts';
import { searchMaxBatch } from '../search/max-batch.ts';
import { replaySteps } from '../snapshot/replay-result.ts';
import { readSnapshotSteps, type MemorySnapshot, type SnapshotReadProgress } from '../snapshot/snapshot.ts';
import { simulate } from '../train/simulate.ts';
import type { MaxBatchResult } from '../result/max-batch.ts';
import { engineRequestSchema, type EngineAnswer, type RequestOf } from './protocol.ts';

export interface EngineHostOptions {
  /** The GPU catalog (resources/gpus.json as parsed JSON). */
  catalog: unknown;
  /** The cuDNN workspace table (resources/cudnn-workspaces-h100.json, parsed), fetched the first time a plan needs it. */
  convTable: () => Promise<unknown>;
  /** How to let the event loop run (default `setTimeout(0)`; a MessageChannel avoids timers' 4 ms clamp). */
  yieldToEventLoop?: () => Promise<void>;
  /** Timeline points of a simulate result (default 2000). */
  timelinePoints?: number;
}

export interface EngineHost {
  /** Runs one message (a request or a cancel) and posts its answers; resolves when the request is answered. */
  handle(message: unknown, post: (answer: EngineAnswer) => void): Promise<void>;
}

/** A field of the plan: an InputError there is an `invalid_plan` answer, elsewhere an `error`. */
const PLAN_FIELD = /^(format|version|name|model|training|allocator|gpu)\b/;

/** The share of a replay's progress bar each stage of reading a snapshot takes; replaying takes the rest. */
const READ_STAGES: Record<SnapshotReadProgress['stage'], [from: number, to: number]> = {
  decompress: [0, 0.1],
  parse: [0.1, 0.4],
  trace: [0.4, 0.45],
};
const REPLAY_FROM = 0.45;

/** Thrown at a pause when the request was cancelled. */
class Cancelled {}

export function createEngineHost(options: EngineHostOptions): EngineHost {
  const catalog: GpuCatalog = parseGpuCatalog(options.catalog);
  const yieldToEventLoop = options.yieldToEventLoop ?? (() => new Promise<void>((resolve) => setTimeout(resolve, 0)));
  let table: Promise<unknown> | null = null;
  const cancelled = new Set<number>();
  /** Requests under way (a cancel for one that is not is ignored). */
  const active = new Set<number>();
  /** The running request of each kind. */
  const running = new Map<string, number>();

  async function pause(id: number): Promise<void> {
    await yieldToEventLoop();
    if (cancelled.has(id)) throw new Cancelled();
  }

  /** The plan, or null once its issues are posted. */
  function plan(id: number, value: unknown, post: (a: EngineAnswer) => void): Plan | null {
    const parsed = safeParsePlan(value, { catalog });
    if (parsed.ok) return parsed.plan;
    post({ kind: 'invalid_plan', id, issues: parsed.issues });
    return null;
  }

  async function device(p: Plan): Promise<Device> {
    let data: unknown = null;
    if (planNeedsConvTable(p)) {
      table ??= options.convTable().catch((error: unknown) => {
        table = null; // try again next time
        throw error;
      });
      data = await table;
    }
    return planGpu(p, catalog, data);
  }

  async function simulateRequest(r: RequestOf<'simulate'>, post: (a: EngineAnswer) => void) {
    const p = plan(r.id, r.plan, post);
    if (!p) return;
    const d = await device(p);
    await pause(r.id);
    post({ kind: 'simulate_result', id: r.id, result: simulate(p, { device: d, timelinePoints: options.timelinePoints }) });
  }

  async function maxBatchRequest(r: RequestOf<'max_batch'>, post: (a: EngineAnswer) => void) {
    const p = plan(r.id, r.plan, post);
    if (!p) return;
    const d = await device(p);
    // The catalog's GPUs, so that a plan that fits nowhere says where it would (`needed.fits_on`), each with the
    // plan's convolution table as the CLI gives it.
    const gpus = catalog.gpus.map((g) => deviceFor(g, d.conv_workspaces));
    const search = searchMaxBatch(p, { device: d, safetyMargin: r.safety_margin, multipleOf: r.multiple_of, catalog: gpus });
    try {
      for (;;) {
        await pause(r.id);
        const next = search.next();
        if (next.done) return post({ kind: 'max_batch_result', id: r.id, result: next.value });
        post({ kind: 'trial', id: r.id, trial: next.value });
      }
    } finally {
      search.return(undefined as never);
    }
  }

  async function adviceRequest(r: RequestOf<'advice'>, post: (a: EngineAnswer) => void) {
    const p = plan(r.id, r.plan, post);
    if (!p) return;
    const d = await device(p);
    // The `batch` goal compares with the plan's own search: run it here, pausing between its trials.
    let maxBatch: MaxBatchResult | undefined;
    if (r.goal === 'batch') {
      const search = searchMaxBatch(p, { device: d });
      for (let next = search.next(); ; next = search.next()) {
        if (next.done) {
          maxBatch = next.value;
          break;
        }
        await pause(r.id);
      }
    }
    const steps = adviseSteps(p, { device: d, goal: r.goal, maxBatch });
    try {
      for (;;) {
        await pause(r.id);
        const next = steps.next();
        if (next.done) return post({ kind: 'advice_done', id: r.id, result: next.value });
        if (next.value.type === 'advice') post({ kind: 'advice_item', id: r.id, advice: next.value.advice });
      }
    } finally {
      steps.return(undefined as never);
    }
  }

  async function replayRequest(r: RequestOf<'replay'>, post: (a: EngineAnswer) => void) {
    const bytes = r.bytes instanceof Uint8Array ? r.bytes : new Uint8Array(r.bytes);
    // Reading (decompressing, parsing the pickle, checking the trace) and replaying, each in steps with a pause
    // between them: a 100 MB snapshot shows its progress and can be cancelled at any point.
    post({ kind: 'progress', id: r.id, fraction: 0, stage: 'decompress' });
    const reading = readSnapshotSteps(bytes);
    let snapshot: MemorySnapshot;
    for (;;) {
      await pause(r.id);
      const next = reading.next();
      if (next.done) {
        snapshot = next.value;
        break;
      }
      const [from, to] = READ_STAGES[next.value.stage];
      post({ kind: 'progress', id: r.id, fraction: from + (to - from) * next.value.fraction, stage: next.value.stage });
    }
    const steps = replaySteps(snapshot, { memoryLimitBytes: r.memory_limit_bytes, allocConf: r.alloc_conf, whatIf: r.what_if });
    for (;;) {
      await pause(r.id);
      const next = steps.next();
      if (next.done) {
        // The file's bytes go back to the sender (transferred by the worker, not copied) when it asked for them.
        return post({ kind: 'replay_result', id: r.id, result: next.value, ...(r.return_bytes ? { bytes: r.bytes } : {}) });
      }
      post({ kind: 'progress', id: r.id, fraction: REPLAY_FROM + (1 - REPLAY_FROM) * next.value.fraction, stage: next.value.stage });
    }
  }

  async function handle(message: unknown, post: (answer: EngineAnswer) => void): Promise<void> {
    const parsed = engineRequestSchema.safeParse(message);
    if (!parsed.success) {
      const id = typeof message === 'object' && message !== null && typeof (message as { id?: unknown }).id === 'number' ? (message as { id: number }).id : 0;
      post({ kind: 'error', id, message: `not a request of the engine protocol: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'message'}: ${i.message}`).join('; ')}`, internal: true });
      return;
    }
    const r = parsed.data;
    if (r.kind === 'cancel') {
      if (active.has(r.id)) cancelled.add(r.id);
      return;
    }
    const older = running.get(r.kind);
    if (older !== undefined) cancelled.add(older);
    running.set(r.kind, r.id);
    active.add(r.id);
    try {
      if (r.kind === 'simulate') await simulateRequest(r, post);
      else if (r.kind === 'max_batch') await maxBatchRequest(r, post);
      else if (r.kind === 'advice') await adviceRequest(r, post);
      else await replayRequest(r, post);
    } catch (error) {
      if (error instanceof Cancelled) post({ kind: 'cancelled', id: r.id });
      else if (error instanceof InputError) {
        if (PLAN_FIELD.test(error.where) && r.kind !== 'replay') post({ kind: 'invalid_plan', id: r.id, issues: [issueOf(error)] });
        else post({ kind: 'error', id: r.id, message: error.message, ...(error.where ? { where: error.where } : {}) });
      } else {
        const e = error instanceof Error ? error : new Error(String(error));
        post({ kind: 'error', id: r.id, message: `internal error: ${e.message}`, internal: true });
      }
    } finally {
      cancelled.delete(r.id);
      active.delete(r.id);
      if (running.get(r.kind) === r.id) running.delete(r.kind);
    }
  }

  return { handle };
}
