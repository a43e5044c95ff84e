/**
 * The comparison's own engine worker (the same worker file and protocol as the editor's, engine/worker/): a
 * comparison runs many requests (each plan simulated and searched, each single change simulated) and the protocol
 * lets a new request of a kind supersede a running one, so they go one at a time here, on a worker the editor's
 * edits cannot cancel. Closing the comparison terminates it: nothing it was doing is wanted any more.
 */
import type { EngineAnswer, EngineRequest, Trial } from '../engine/protocol.ts';

/** The answer that ends a request (a result, its plan's problems, an error). */
export type FinalAnswer = Exclude<EngineAnswer, { kind: 'trial' | 'progress' | 'advice_item' }>;

type Pending = { id: number; resolve: (answer: FinalAnswer) => void; onTrial?: ((trial: Trial) => void) | undefined };

export class CompareWorker {
  #worker: Worker | null = null;
  #nextId = 1;
  #queue: Promise<unknown> = Promise.resolve();
  #pending: Pending | null = null;
  #closed = false;

  #ensure(): Worker {
    if (!this.#worker) {
      this.#worker = new Worker(new URL('../engine.worker.ts', import.meta.url), { type: 'module', name: 'memplan-compare' });
      this.#worker.onmessage = (e: MessageEvent<EngineAnswer>) => {
        const answer = e.data;
        const pending = this.#pending;
        if (!pending || answer.id !== pending.id) return;
        if (answer.kind === 'trial') pending.onTrial?.(answer.trial);
        else if (answer.kind !== 'progress' && answer.kind !== 'advice_item') {
          this.#pending = null;
          pending.resolve(answer);
        }
      };
      this.#worker.onerror = (e) => {
        const pending = this.#pending;
        this.#pending = null;
        pending?.resolve({ kind: 'error', id: pending.id, message: e.message || 'the engine stopped', internal: true });
      };
    }
    return this.#worker;
  }

  /** Sends `request` (its id filled in) after the requests before it have been answered; resolves with its final answer. */
  run(request: Omit<Extract<EngineRequest, { kind: 'simulate' | 'max_batch' }>, 'id'>, onTrial?: (trial: Trial) => void): Promise<FinalAnswer> {
    const next = this.#queue.then(
      () =>
        new Promise<FinalAnswer>((resolve) => {
          const id = this.#nextId++;
          if (this.#closed) return resolve({ kind: 'cancelled', id });
          this.#pending = { id, resolve, onTrial };
          this.#ensure().postMessage({ ...request, id } as EngineRequest);
        }),
    );
    this.#queue = next;
    return next;
  }

  /** Stops everything: the request under way and those queued answer `cancelled`. */
  close(): void {
    this.#closed = true;
    this.#worker?.terminate();
    this.#worker = null;
    const pending = this.#pending;
    this.#pending = null;
    pending?.resolve({ kind: 'cancelled', id: pending.id });
  }
}
