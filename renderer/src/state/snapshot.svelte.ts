/**
 * The snapshot view's state: a real run's PyTorch memory snapshot read and replayed in a worker of its own (so a
 * 100 MB file never delays the editor's simulations), and a saved plan's prediction beside it.
 *
 * The file's bytes are transferred to the worker, not copied, and come back with the result (`return_bytes`), so
 * they can be attached to a plan without reading the file again. Every request carries a fresh id; answers of an
 * older one are dropped. Cancel asks the worker to stop at its next pause (milliseconds away: reading and replaying
 * pause every few hundred thousand opcodes or events).
 */
import { replayResultSchema, safeParsePlan, simulateResultSchema, stringifyResult, type EngineAnswer, type EngineRequest, type ReplayResult, type SimulateResult } from '../../../engine/index.ts';
import type { PlanSummary, SnapshotSummary } from '../../../electron/common/ipc.ts';
import { api } from '../lib/api.ts';
import { SNAPSHOT_WHAT_IFS } from '../snapshot/what-ifs.ts';
import { settings } from './settings.svelte.ts';
import { toasts } from './toasts.svelte.ts';


export type ReadStage = 'decompress' | 'parse' | 'trace' | 'replay' | 'segments' | 'what_if';

export class SnapshotSession {
  /** The view is shown (in place of the editor). */
  open = $state(false);
  name = $state('');
  status = $state<'idle' | 'reading' | 'done' | 'error' | 'cancelled'>('idle');
  stage = $state<ReadStage>('decompress');
  fraction = $state(0);
  error = $state<string | null>(null);
  result = $state.raw<ReplayResult | null>(null);
  /** The stored size of the file (for the note on attaching). */
  sizeBytes = $state(0);
  /**
   * The cap the recorded run ran under (set_per_process_memory_fraction, which snapshots do not record), in bytes;
   * null for none. Reading a new file clears it; the replay's `likely_cap` suggests one.
   */
  capBytes = $state<number | null>(null);

  /** Saved plans to compare with, and the one chosen. */
  plans = $state.raw<PlanSummary[]>([]);
  planId = $state<string | null>(null);
  prediction = $state.raw<SimulateResult | null>(null);
  /** The chosen plan's `training.steps` (defaults applied): the steps a recorded run of it ran; null if it does not parse. */
  plannedSteps = $state<number | null>(null);
  predictionStatus = $state<'none' | 'simulating' | 'ready' | 'invalid'>('none');
  /** Snapshots attached to the chosen plan. */
  attached = $state.raw<SnapshotSummary[]>([]);
  /** The attachment on screen (its id), when the snapshot came from the database or was just attached. */
  attachedId = $state<string | null>(null);
  attaching = $state(false);

  #worker: Worker | null = null;
  #nextId = 1;
  #replayId = 0;
  #simulateId = 0;
  /** The file as opened, once the worker gave it back (to attach it). */
  #bytes: ArrayBuffer | null = null;

  #ensureWorker(): Worker {
    if (!this.#worker) {
      this.#worker = new Worker(new URL('../engine.worker.ts', import.meta.url), { type: 'module', name: 'memplan-snapshot' });
      this.#worker.onmessage = (e: MessageEvent<EngineAnswer>) => this.#receive(e.data);
      this.#worker.onerror = (e) => {
        this.status = 'error';
        this.error = e.message || 'the engine stopped';
      };
    }
    return this.#worker;
  }

  #send(request: EngineRequest, transfer: Transferable[] = []): void {
    this.#ensureWorker().postMessage(request, transfer);
  }

  show(): void {
    this.open = true;
    void this.refreshPlans();
  }

  close(): void {
    this.open = false;
  }

  /** The native open dialog, then reads the file; `planId` (the plan being edited, if saved) is offered for comparison. */
  async openFile(planId: string | null = null): Promise<void> {
    const memplan = api();
    this.show();
    if (!memplan) return;
    if (planId !== null && this.planId === null) void this.choosePlan(planId);
    const file = await memplan.files.openBytes({ purpose: 'snapshot' });
    if (!file) return;
    this.attachedId = null;
    this.capBytes = null;
    this.read(file.name, file.bytes);
  }

  /** Reads and replays a snapshot's bytes (transferred to the worker: `bytes` is unusable afterwards). */
  read(name: string, bytes: ArrayBuffer): void {
    if (this.status === 'reading') this.cancel();
    const id = this.#nextId++;
    this.#replayId = id;
    this.name = name;
    this.sizeBytes = bytes.byteLength;
    this.status = 'reading';
    this.stage = 'decompress';
    this.fraction = 0;
    this.error = null;
    this.result = null;
    this.#bytes = null;
    const cap = this.capBytes === null ? {} : { memory_limit_bytes: this.capBytes };
    this.#send({ kind: 'replay', id, bytes, what_if: [...SNAPSHOT_WHAT_IFS], return_bytes: true, ...cap }, [bytes]);
  }

  /** Replays the file on screen again under `capBytes` (null: no cap): a new result, not attached yet. */
  replayWithCap(capBytes: number | null): void {
    const bytes = this.#bytes;
    if (this.status !== 'done' || !bytes) return;
    this.capBytes = capBytes;
    this.attachedId = null;
    this.read(this.name, bytes);
  }

  cancel(): void {
    if (this.status !== 'reading') return;
    this.#send({ kind: 'cancel', id: this.#replayId });
    this.#replayId = 0;
    this.status = 'cancelled';
  }

  #receive(answer: EngineAnswer): void {
    if (answer.id === this.#simulateId) return this.#receivePrediction(answer);
    if (answer.id !== this.#replayId) return; // an older file, or a cancelled one
    switch (answer.kind) {
      case 'progress':
        this.fraction = answer.fraction;
        if (answer.stage) this.stage = answer.stage;
        return;
      case 'replay_result':
        this.result = answer.result;
        this.#bytes = answer.bytes instanceof ArrayBuffer ? answer.bytes : null;
        this.status = 'done';
        this.fraction = 1;
        return;
      case 'error':
        this.status = 'error';
        this.error = answer.where && !answer.message.startsWith(answer.where) ? `${answer.where}: ${answer.message}` : answer.message;
        return;
      case 'cancelled':
        this.status = 'cancelled';
        return;
      default:
        return;
    }
  }

  #receivePrediction(answer: EngineAnswer): void {
    if (answer.kind === 'simulate_result') {
      this.prediction = answer.result;
      this.predictionStatus = 'ready';
    } else if (answer.kind === 'invalid_plan' || answer.kind === 'error') {
      this.predictionStatus = 'invalid';
    }
  }

  async refreshPlans(): Promise<void> {
    const memplan = api();
    if (!memplan) return;
    this.plans = (await memplan.plans.list({})).plans;
  }

  /** Compares with a saved plan: its stored simulation if it has one the engine reads, else simulated now. */
  async choosePlan(planId: string | null): Promise<void> {
    this.planId = planId;
    this.prediction = null;
    this.attached = [];
    this.predictionStatus = 'none';
    const memplan = api();
    if (!memplan || planId === null) return;
    const record = await memplan.plans.get({ id: planId });
    if (!record || this.planId !== planId) return;
    const parsed = safeParsePlan(record.plan);
    this.plannedSteps = parsed.ok ? parsed.plan.training.steps : null;
    void this.refreshAttached();
    const stored = record.result?.kind === 'simulate' ? simulateResultSchema.safeParse(record.result) : null;
    if (stored?.success) {
      this.prediction = stored.data;
      this.predictionStatus = 'ready';
      return;
    }
    this.predictionStatus = 'simulating';
    this.#simulateId = this.#nextId++;
    this.#send({ kind: 'simulate', id: this.#simulateId, plan: record.plan });
  }

  async refreshAttached(): Promise<void> {
    const memplan = api();
    const planId = this.planId;
    if (!memplan || planId === null) return;
    const list = await memplan.snapshots.list({ plan_id: planId });
    if (this.planId === planId) this.attached = list.snapshots;
  }

  get canAttach(): boolean {
    return this.status === 'done' && this.result !== null && this.#bytes !== null && this.planId !== null && !this.attaching;
  }

  /** Stores the file (gzipped, by the main process) and its replay with the chosen plan. */
  async attach(): Promise<void> {
    const memplan = api();
    const result = this.result;
    const bytes = this.#bytes;
    const planId = this.planId;
    if (!memplan || !result || !bytes || planId === null) return;
    this.attaching = true;
    try {
      const summary = await memplan.snapshots.attach({
        plan_id: planId,
        name: this.name,
        bytes, // structured-cloned by IPC: the view keeps its copy
        result: JSON.parse(stringifyResult(result)) as { kind: string; schema_version: number },
        memory_limit_bytes: result.memory_limit_bytes,
      });
      this.attachedId = summary.id;
      const plan = this.plans.find((p) => p.id === planId);
      toasts.show(settings.m.sAttachedToast(plan?.name ?? ''));
      await this.refreshAttached();
    } catch (error) {
      toasts.show((error as Error).message, { tone: 'error' });
    } finally {
      this.attaching = false;
    }
  }

  /** Shows an attached snapshot: its stored replay when the engine still reads it, else the bytes replayed again. */
  async openAttached(id: string): Promise<void> {
    const memplan = api();
    if (!memplan) return;
    const record = await memplan.snapshots.get({ id });
    if (!record) return;
    this.attachedId = id;
    const stored = record.result ? replayResultSchema.safeParse(record.result) : null;
    if (stored?.success) {
      if (this.status === 'reading') this.cancel();
      this.#replayId = 0;
      this.name = record.name;
      this.sizeBytes = record.stored_bytes;
      this.result = stored.data;
      this.capBytes = stored.data.memory_limit_bytes;
      this.#bytes = record.bytes;
      this.error = null;
      this.status = 'done';
      return;
    }
    this.capBytes = record.memory_limit_bytes ?? null;
    this.read(record.name, record.bytes);
  }

  async detach(snapshot: SnapshotSummary): Promise<void> {
    const memplan = api();
    if (!memplan) return;
    await memplan.snapshots.detach({ id: snapshot.id });
    if (this.attachedId === snapshot.id) this.attachedId = null;
    toasts.show(settings.m.sDetachedToast(snapshot.name));
    await this.refreshAttached();
  }
}

export const snapshotSession = new SnapshotSession();
