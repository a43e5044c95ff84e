/**
 * The CLI on several cores: worker threads (cli/engine-worker.ts), by default on machines of kMinCores cores or
 * more, up to kMaxWorkers and never more than the cores (`os.availableParallelism()`), for work whose parts are
 * independent simulations:
 * - the search: the workers simulate ahead the trials it will likely need while the main thread runs the one it
 *   needs (Note [Searching on every core], engine/search/max-batch.ts); a search starts them only when its second
 *   trial shows it will take seconds (kWorthWorkersMs).
 * - `memplan max-batch`'s advice, if the search started them: under the `batch` goal each variant
 *   (engine/search/advice.ts) is a search of its own, depending on its plan and the plan's own search only; the
 *   workers search the variants side by side and the advice is ranked as `advise` ranks it.
 * - `max-batch --gpu all`: one search per GPU.
 * Each gives what one thread gives (the same answers, trials and advice; tested in test/cli/engine-workers.test.ts);
 * a job whose worker fails runs on the main thread. `memplan simulate` does not use them: its variants are one
 * simulation each, and a new thread, which loads and compiles the engine anew, takes about as long to simulate one
 * as the warm main thread takes for all of them (GPT-2 XL: four variants in about 250 ms on the main thread).
 */
import { availableParallelism } from 'node:os';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import {
  InputError,
  adviseVariant,
  findMaxBatch,
  rankAdvice,
  kWorthWorkersMs,
  searchOnPool,
  setUpAdvice,
  type AdviceEvent,
  type AdviceOptions,
  type AdviceResult,
  type MaxBatchOptions,
  type MaxBatchResult,
  type Plan,
  type PoolSearchStats,
  type TrialPool,
} from '../engine/index.ts';
import { portableDevice, type Job, type JobResults, type PortableSearchOptions, type Reply } from './engine-worker.ts';

/** The worker's module: cli/engine-worker.ts run from source, dist/cli/engine-worker.js once built. */
const workerUrl = new URL(`./engine-worker${extname(fileURLToPath(import.meta.url))}`, import.meta.url);

interface Queued {
  job: Job;
  resolve: (result: never) => void;
  reject: (error: Error) => void;
}

/**
 * Workers at most. A worker loads and compiles the engine anew (about 150 ms of a core) and runs its first
 * simulations 2-4 times slower than the warm main thread: a few workers that each run many trials do better than
 * many that each run two or three.
 */
const kMaxWorkers = 4;

/**
 * Cores a machine needs for workers by default. Measured on 2 cores (this machine, and the 16-core host pinned to
 * 2): no gain, some loss (Llama 2 70B max-batch 3.6 s alone, 3.8 s with workers; --gpu all of GPT-2 1.65 s and
 * 1.75 s); on the 16-core host with 4 workers: a 405B-shaped Llama's max-batch 5.4 s -> 4.0 s, --gpu all of GPT-2 XL
 * 3.5 s -> 1.75 s.
 */
const kMinCores = 4;

/** Workers by default: none below kMinCores, else one core fewer than the machine has, at most kMaxWorkers. */
export function defaultWorkers(cores = availableParallelism()): number {
  return cores < kMinCores ? 0 : Math.min(kMaxWorkers, cores - 1);
}

/** Worker threads that run the engine's independent simulations for the CLI (this file's header says which). */
export class EngineWorkers {
  private readonly count: number;
  private readonly worthWorkersMs: number;
  private readonly workers: Worker[] = [];
  private readonly idle: Worker[] = [];
  private readonly queue: Queued[] = [];
  /** The job each busy worker runs: rejected if the worker dies. */
  private readonly running = new Map<Worker, Queued>();
  /** The last search's trials: simulated by the main thread, simulated ahead by workers, and of those the ones it used. */
  lastSearch: PoolSearchStats = { onThisThread: 0, ahead: 0, aheadUsed: 0 };

  /**
   * Up to `count` workers (default `defaultWorkers()`; never more than the machine has cores), started when a
   * search's second trial shows it long enough (`worthWorkersMs`; tests pass 0) or for `--gpu all`'s searches.
   * Fewer than 2: none, the main thread does the work itself.
   */
  constructor(count: number | undefined = undefined, options: { worthWorkersMs?: number } = {}) {
    count = Math.min(count ?? defaultWorkers(), availableParallelism());
    this.count = count > 1 ? count : 0;
    this.worthWorkersMs = options.worthWorkersMs ?? kWorthWorkersMs;
  }

  /** The workers running. */
  get size(): number {
    return this.workers.length;
  }

  /** Starts the workers now (a search starts them itself when it is long; `--gpu all` always). */
  start(): void {
    while (this.workers.length < this.count) {
      const worker = new Worker(workerUrl);
      worker.on('message', (reply: Reply) => this.answered(worker, reply));
      // A worker that fails (its module does not load, it runs out of heap) or exits is gone: its job is rejected
      // and the others carry on; with none left, the jobs waiting are rejected too.
      worker.on('error', (error) => this.gone(worker, error));
      worker.on('exit', (code) => this.gone(worker, new Error(`a worker thread exited (code ${code})`)));
      this.workers.push(worker);
      this.idle.push(worker);
    }
  }

  private answered(worker: Worker, reply: Reply): void {
    const job = this.running.get(worker);
    if (!job) return;
    this.running.delete(worker);
    this.idle.push(worker);
    if ('result' in reply) job.resolve(reply.result as never);
    else job.reject(errorOf(reply.error));
    this.dispatch();
  }

  private gone(worker: Worker, error: Error): void {
    const w = this.workers.indexOf(worker);
    if (w < 0) return;
    // The work goes on without it (the main thread takes its job): said only when asked (a broken install would
    // otherwise only be slower).
    if (process.env['MEMPLAN_DEBUG'] === '1') process.stderr.write(`memplan: a worker thread stopped (${error.message}); its work runs on the main thread\n`);
    this.workers.splice(w, 1);
    const i = this.idle.indexOf(worker);
    if (i >= 0) this.idle.splice(i, 1);
    const job = this.running.get(worker);
    this.running.delete(worker);
    job?.reject(error);
    if (this.workers.length === 0) for (const queued of this.queue.splice(0)) queued.reject(error);
  }

  /** Runs a job on the next free worker. */
  run<K extends Job['kind']>(job: Extract<Job, { kind: K }>): Promise<JobResults[K]> {
    return new Promise((resolve, reject) => {
      if (this.workers.length === 0) return reject(new Error('no worker thread is running'));
      this.queue.push({ job, resolve: resolve as (r: never) => void, reject });
      this.dispatch();
    });
  }

  private dispatch(): void {
    while (this.idle.length > 0 && this.queue.length > 0) {
      const worker = this.idle.pop()!;
      const queued = this.queue.shift()!;
      this.running.set(worker, queued);
      worker.postMessage(queued.job);
    }
  }

  /** The advice `advise(plan, options)` gives, each variant simulated by the next free worker. */
  async advise(plan: Plan, options: AdviceOptions): Promise<AdviceResult> {
    const setup = setUpAdvice(plan, options);
    // The variants' searches are about as long as the plan's: they run on the workers if it started them.
    if (this.size === 0) return rankAdvice(setup, setup.variants.map((v) => adviseVariant(setup, v, options.device)));
    const device = portableDevice(options.device);
    const { variants, ...shared } = setup; // each job carries its own variant, not all of them
    // A variant whose worker failed is simulated here (an error in its simulation then surfaces from this thread).
    const outcomes: AdviceEvent[] = await Promise.all(
      variants.map((variant) => this.run({ kind: 'variant', setup: { ...shared, variants: [] }, variant, device }).catch(() => adviseVariant(setup, variant, options.device))),
    );
    return rankAdvice(setup, outcomes);
  }

  /**
   * The result `findMaxBatch(plan, options)` gives, the workers simulating ahead the trials the search will likely
   * need (engine/search/max-batch.ts's searchOnPool: they start after a second trial of kWorthWorkersMs or more).
   */
  async maxBatch(plan: Plan, options: MaxBatchOptions): Promise<MaxBatchResult> {
    const portable = portableSearchOptions(options);
    const workers = this;
    const pool: TrialPool = {
      get size() {
        return workers.size;
      },
      ahead: availableParallelism() - 1, // the main thread keeps a core
      start: () => this.start(),
      simulate: (p, batch, o) => this.run({ kind: 'trial', plan: p, batch, options: { ...portable, untilSteady: o.untilSteady } }),
    };
    this.lastSearch = { onThisThread: 0, ahead: 0, aheadUsed: 0 };
    return searchOnPool(plan, options, { pool, worthWorkersMs: this.worthWorkersMs, pause: () => new Promise((resolve) => setImmediate(resolve)) }, this.lastSearch);
  }

  /**
   * `findMaxBatch` of each (plan, options), one search per worker at a time; a search the engine refuses (its plan
   * asks for what is not simulated on that GPU) gives the InputError saying why, and the others go on.
   */
  async maxBatchEach(searches: readonly { plan: Plan; options: MaxBatchOptions }[]): Promise<(MaxBatchResult | InputError)[]> {
    const here = (plan: Plan, options: MaxBatchOptions): MaxBatchResult | InputError => {
      try {
        return findMaxBatch(plan, options);
      } catch (error) {
        if (error instanceof InputError) return error;
        throw error;
      }
    };
    this.start();
    if (this.size === 0) return searches.map(({ plan, options }) => here(plan, options));
    // A search whose worker failed runs here (an error in it then surfaces from this thread); one the engine
    // refused there is refused here too, without searching again.
    return Promise.all(searches.map(({ plan, options }) => this.run({ kind: 'search', plan, options: portableSearchOptions(options) }).catch((error: unknown) => (error instanceof InputError ? error : here(plan, options)))));
  }

  /** Stops the workers (the process can then exit). */
  async close(): Promise<void> {
    const workers = this.workers.splice(0);
    this.idle.length = 0;
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

/** A worker's error on this thread: an InputError again (exit 2 at its field), else an internal error with its stack. */
function errorOf(error: Extract<Reply, { error: unknown }>['error']): Error {
  if (error.input) return new InputError(error.input.where, error.input.problem);
  return new Error(`a simulation failed in a worker thread: ${error.message}`, { cause: error.stack });
}

function portableSearchOptions({ device, catalog, trialOutcome: _host, ...rest }: MaxBatchOptions): PortableSearchOptions {
  return { ...rest, device: portableDevice(device), ...(catalog ? { catalog: catalog.map(portableDevice) } : {}) };
}
