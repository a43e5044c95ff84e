/**
 * The engine client: one warm worker for the app's life. Every request carries a fresh id; an answer whose id is
 * not the latest of its kind is dropped, so a result never overwrites a newer edit's. Edits are simulated at
 * once, or at most every ~150 ms while they come quickly; a search streams its trials and can be cancelled.
 *
 * Note [Cancel by replacing the worker]
 * The worker sees a `cancel` only between units of work (engine/worker/host.ts pauses between trials, variants,
 * replay stages); one simulation is a single unit, and a huge one (a 405B model, a long layer list) runs up to
 * ~10 s without a pause. So every cancel, the user's (Cancel beside "Simulating…", Cancel of a search) and the
 * implicit one of an edit that supersedes a running simulation, starts a clock: a request that has not answered
 * (`cancelled`, or its result) within CANCEL_GRACE_MS has its worker terminated and a fresh one started at once
 * (kept warm); the requests still wanted (the latest simulation of an edit, a search not cancelled) are sent to it
 * again, under the same ids. Nothing is lost but the cancelled work and the worker's caches.
 */
import type { AdviceItem, EngineAnswer, EngineRequest, MaxBatchResult, NotApplicable, PlanIssue, SimulateResult, Trial } from '../engine/protocol.ts';

export const SIMULATE_DEBOUNCE_MS = 150;
/** Trials after the first reach the views at most this often: each redraws the batch curve on the main thread. */
export const TRIAL_FLUSH_MS = 120;
/** A cancelled request answers within this, or its worker is replaced (Note [Cancel by replacing the worker]). */
export const CANCEL_GRACE_MS = 300;

/** Answers after which a request is finished: nothing more comes for its id. */
const FINAL_ANSWERS: ReadonlySet<EngineAnswer['kind']> = new Set(['simulate_result', 'invalid_plan', 'error', 'max_batch_result', 'advice_done', 'replay_result', 'cancelled']);

type Kind = 'simulate' | 'max_batch' | 'advice' | 'batch_advice';

export class EngineClient {
  /** The latest simulation of a valid plan (kept while a newer plan is invalid or still running). */
  simulation = $state.raw<SimulateResult | null>(null);
  /** The plan problems of the latest simulate request, each with its field path. */
  issues = $state.raw<PlanIssue[]>([]);
  /** An input error that is not a field of the plan (an unsupported model type, say). */
  error = $state.raw<{ message: string; where?: string } | null>(null);
  simulating = $state(false);
  /** The user cancelled the latest simulation: the result on screen (if any) is of an earlier plan. */
  simulateCancelled = $state(false);
  /** How many times a worker that did not answer a cancel in time was replaced by a fresh one. */
  workerReplacements = $state(0);
  /** Milliseconds from sending the latest simulation to its answer. */
  simulateMs = $state<number | null>(null);
  /** The simulation on screen is not of the plan as it is now (invalid, or being recomputed). */
  stale = $state(false);

  advice = $state.raw<AdviceItem[]>([]);
  adviceDone = $state(false);
  /** The changes not advised and why: they come with the advice's end (`advice_done`). */
  notAdvised = $state.raw<NotApplicable[]>([]);

  /** After a search: what would allow a larger effective batch (advice with the `batch` goal). */
  batchAdvice = $state.raw<AdviceItem[]>([]);
  batchAdviceDone = $state(false);
  batchNotAdvised = $state.raw<NotApplicable[]>([]);

  trials = $state.raw<Trial[]>([]);
  maxBatch = $state.raw<MaxBatchResult | null>(null);
  searching = $state(false);
  searchCancelled = $state(false);
  searchError = $state<string | null>(null);

  #worker: Worker | null = null;
  #nextId = 1;
  #latest: Record<Kind, number> = { simulate: 0, max_batch: 0, advice: 0, batch_advice: 0 };
  #searchedPlan: unknown = null;
  #sentAt = 0;
  #lastSentAt = -Infinity;
  #timer: ReturnType<typeof setTimeout> | null = null;
  #lastPlanText = '';
  #pendingTrials: Trial[] = [];
  #trialTimer: ReturnType<typeof setTimeout> | null = null;
  /** Requests sent to the current worker and not yet finished (FINAL_ANSWERS), by id: resent to a replacement. */
  #inFlight = new Map<number, Exclude<EngineRequest, { kind: 'cancel' }>>();
  /** Cancelled requests not yet finished, with the time by which they must be (performance.now()). */
  #cancelDeadlines = new Map<number, number>();
  #cancelTimer: ReturnType<typeof setTimeout> | null = null;

  #ensureWorker(): Worker {
    if (!this.#worker) {
      this.#worker = new Worker(new URL('../engine.worker.ts', import.meta.url), { type: 'module', name: 'memplan-engine' });
      this.#worker.onmessage = (e: MessageEvent<EngineAnswer>) => this.#receive(e.data);
      this.#worker.onerror = (e) => {
        this.error = { message: e.message || 'the engine stopped' };
        this.simulating = false;
        this.searching = false;
      };
    }
    return this.#worker;
  }

  #send(request: EngineRequest): void {
    if (request.kind !== 'cancel') this.#inFlight.set(request.id, request);
    this.#ensureWorker().postMessage(request);
  }

  /** Asks the worker to stop request `id`, and replaces the worker if it has not within CANCEL_GRACE_MS. */
  #cancel(id: number): void {
    if (!this.#inFlight.has(id)) return;
    this.#send({ kind: 'cancel', id });
    if (!this.#cancelDeadlines.has(id)) this.#cancelDeadlines.set(id, performance.now() + CANCEL_GRACE_MS);
    this.#armCancelClock();
  }

  #armCancelClock(): void {
    if (this.#cancelTimer) clearTimeout(this.#cancelTimer);
    this.#cancelTimer = null;
    if (this.#cancelDeadlines.size === 0) return;
    const first = Math.min(...this.#cancelDeadlines.values());
    this.#cancelTimer = setTimeout(() => {
      this.#cancelTimer = null;
      if ([...this.#cancelDeadlines.values()].some((deadline) => deadline <= performance.now())) this.#replaceWorker();
      else this.#armCancelClock();
    }, Math.max(0, first - performance.now()));
  }

  /** A request finished: it is no longer in flight, nor awaited by the cancel clock. */
  #finished(id: number): void {
    this.#inFlight.delete(id);
    if (this.#cancelDeadlines.delete(id)) this.#armCancelClock();
  }

  /**
   * The worker is stuck in a cancelled request (Note [Cancel by replacing the worker]): terminated, a fresh one
   * started, and the requests still wanted sent to it under their ids. A search starts over (its trials so far are
   * dropped: the new worker streams them again).
   */
  #replaceWorker(): void {
    const wanted = [...this.#inFlight.values()].filter((request) => !this.#cancelDeadlines.has(request.id) && this.#isLatest(request.id));
    this.#worker?.terminate();
    this.#worker = null;
    this.#inFlight.clear();
    this.#cancelDeadlines.clear();
    this.workerReplacements++;
    this.#ensureWorker();
    for (const request of wanted) {
      if (request.kind === 'max_batch') {
        this.#dropPendingTrials();
        this.trials = [];
      }
      this.#send(request);
    }
  }

  #isLatest(id: number): boolean {
    return id === this.#latest.simulate || id === this.#latest.max_batch || id === this.#latest.advice || id === this.#latest.batch_advice;
  }

  /** Starts the worker ahead of the first request, so the first result costs the simulation only. */
  warm(): void {
    this.#ensureWorker();
  }

  /**
   * Simulates `plan` as the user edits: an edit after a quiet spell is sent at once (a result within 100 ms of
   * the edit), edits in quick succession (typing a number) at most once per SIMULATE_DEBOUNCE_MS, the last one
   * always. An identical plan is not simulated again unless `force`.
   */
  requestSimulate(plan: unknown, { immediate = false, force = false } = {}): void {
    const text = JSON.stringify(plan);
    if (!force && text === this.#lastPlanText) return;
    this.#lastPlanText = text;
    this.stale = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    const wait = this.#lastSentAt + SIMULATE_DEBOUNCE_MS - performance.now();
    if (immediate || wait <= 0) this.#simulateNow(plan);
    else
      this.#timer = setTimeout(() => {
        this.#timer = null;
        this.#simulateNow(plan);
      }, wait);
  }

  /** A plan that cannot be sent (a config.json that is not JSON): the result on screen is marked stale. */
  markStale(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    this.#lastPlanText = '';
    this.stale = true;
  }

  /**
   * Stops the running simulation (and the advice that would follow it): the worker answers `cancelled`, or is
   * replaced (Note [Cancel by replacing the worker]). The result on screen, if any, stays, marked stale; the same
   * plan is simulated again on the next request.
   */
  cancelSimulate(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    if (!this.simulating) return;
    const { simulate, advice } = this.#latest;
    this.#latest.simulate = 0;
    this.#latest.advice = 0;
    this.#cancel(simulate);
    this.#cancel(advice);
    this.#lastPlanText = '';
    this.simulating = false;
    this.simulateCancelled = true;
    this.stale = true;
    this.adviceDone = true;
  }

  #simulateNow(plan: unknown): void {
    const id = this.#nextId++;
    // The simulation and advice of an earlier edit, if still running, are not wanted any more.
    if (this.#latest.simulate) this.#cancel(this.#latest.simulate);
    if (this.#latest.advice) this.#cancel(this.#latest.advice);
    this.#latest.simulate = id;
    this.#latest.advice = 0;
    this.#sentAt = performance.now();
    this.#lastSentAt = this.#sentAt;
    this.simulating = true;
    this.simulateCancelled = false;
    this.#send({ kind: 'simulate', id, plan });
    // Advice follows the result, variant by variant (sent now: the worker answers in order).
    const adviceId = this.#nextId++;
    this.#latest.advice = adviceId;
    this.advice = [];
    this.notAdvised = [];
    this.adviceDone = false;
    this.#send({ kind: 'advice', id: adviceId, plan });
  }

  startMaxBatch(plan: unknown): void {
    if (this.searching) this.cancelMaxBatch();
    const id = this.#nextId++;
    this.#latest.max_batch = id;
    this.#dropPendingTrials();
    this.trials = [];
    this.maxBatch = null;
    this.searchCancelled = false;
    this.searchError = null;
    this.searching = true;
    this.batchAdvice = [];
    this.batchNotAdvised = [];
    this.batchAdviceDone = false;
    this.#latest.batch_advice = 0;
    this.#searchedPlan = plan;
    this.#send({ kind: 'max_batch', id, plan });
  }

  cancelMaxBatch(): void {
    if (!this.searching) return;
    this.#cancel(this.#latest.max_batch);
    if (this.#latest.batch_advice) this.#cancel(this.#latest.batch_advice);
    this.#flushTrials();
    this.#latest.max_batch = 0;
    this.searching = false;
    this.searchCancelled = true;
  }

  #receive(answer: EngineAnswer): void {
    const id = answer.id;
    if (FINAL_ANSWERS.has(answer.kind)) this.#finished(id);
    const kind: Kind | null =
      id === this.#latest.simulate ? 'simulate' : id === this.#latest.max_batch ? 'max_batch' : id === this.#latest.advice ? 'advice' : id === this.#latest.batch_advice ? 'batch_advice' : null;
    if (kind === null) return; // a stale answer: the user has edited since
    switch (answer.kind) {
      case 'simulate_result':
        this.simulation = answer.result;
        this.issues = [];
        this.error = null;
        this.simulating = false;
        this.stale = false;
        this.simulateMs = performance.now() - this.#sentAt;
        return;
      case 'invalid_plan':
        if (kind === 'simulate') {
          this.issues = answer.issues;
          this.error = null;
          this.simulating = false;
        } else if (kind === 'max_batch') {
          this.searching = false;
          this.searchError = answer.issues.map((i) => `${i.path}: ${i.message}`).join('\n');
        } else this.#adviceFinished(kind);
        return;
      case 'error':
        if (kind === 'simulate') {
          this.error = { message: answer.message, ...(answer.where !== undefined ? { where: answer.where } : {}) };
          this.issues = [];
          this.simulating = false;
        } else if (kind === 'max_batch') {
          this.searching = false;
          this.searchError = answer.message;
        } else this.#adviceFinished(kind);
        return;
      case 'trial':
        this.#pendingTrials.push(answer.trial);
        // The first trial shows at once; later ones are gathered so a fast search redraws a few times, not each trial.
        if (this.trials.length === 0) this.#flushTrials();
        else this.#trialTimer ??= setTimeout(() => this.#flushTrials(), TRIAL_FLUSH_MS);
        return;
      case 'max_batch_result': {
        this.#dropPendingTrials();
        this.maxBatch = answer.result;
        this.trials = answer.result.trials;
        this.searching = false;
        // Then what would allow a larger batch, change by change.
        const adviceId = this.#nextId++;
        this.#latest.batch_advice = adviceId;
        this.#send({ kind: 'advice', id: adviceId, plan: this.#searchedPlan, goal: 'batch' });
        return;
      }
      case 'advice_item':
        if (kind === 'batch_advice') this.batchAdvice = [...this.batchAdvice, answer.advice];
        else this.advice = [...this.advice, answer.advice];
        return;
      case 'advice_done':
        // The whole advice, ranked best first, replaces the items as they came.
        if (kind === 'batch_advice') {
          this.batchAdvice = answer.result.advice;
          this.batchNotAdvised = answer.result.not_applicable;
        } else {
          this.advice = answer.result.advice;
          this.notAdvised = answer.result.not_applicable;
        }
        this.#adviceFinished(kind);
        return;
      case 'cancelled':
        if (kind === 'max_batch') this.searching = false;
        else this.#adviceFinished(kind);
        return;
      default:
        return;
    }
  }

  #flushTrials(): void {
    if (this.#trialTimer) clearTimeout(this.#trialTimer);
    this.#trialTimer = null;
    if (this.#pendingTrials.length === 0) return;
    this.trials = [...this.trials, ...this.#pendingTrials];
    this.#pendingTrials = [];
  }

  #dropPendingTrials(): void {
    if (this.#trialTimer) clearTimeout(this.#trialTimer);
    this.#trialTimer = null;
    this.#pendingTrials = [];
  }

  /** Forgets the last search (another plan is open): a search belongs to the plan it was run on. */
  resetSearch(): void {
    if (this.searching) this.cancelMaxBatch();
    this.#dropPendingTrials();
    this.trials = [];
    this.maxBatch = null;
    this.searchCancelled = false;
    this.searchError = null;
    this.batchAdvice = [];
    this.batchNotAdvised = [];
    this.batchAdviceDone = false;
    this.#latest.batch_advice = 0;
  }

  #adviceFinished(kind: Kind): void {
    if (kind === 'batch_advice') this.batchAdviceDone = true;
    else if (kind === 'advice') this.adviceDone = true;
  }

  dispose(): void {
    if (this.#cancelTimer) clearTimeout(this.#cancelTimer);
    this.#cancelTimer = null;
    this.#cancelDeadlines.clear();
    this.#inFlight.clear();
    this.#worker?.terminate();
    this.#worker = null;
  }
}
