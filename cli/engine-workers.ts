/**
 * The CLI on every core: worker threads (cli/engine-worker.ts), up to kMaxWorkers and no more than the machine has
 * cores (`os.availableParallelism()`), for the work whose parts are independent simulations:
 * - `memplan max-batch`'s advice: under the `batch` goal each variant (engine/search/advice.ts) is a search of its
 *   own, depending on its plan and the plan's own search only; the workers search the variants side by side and
 *   the advice is ranked as `advise` ranks it.
 * - the search itself: the workers simulate ahead the trials the search will likely need while the main thread
 *   runs the one it needs (Note [Searching on every core], engine/search/max-batch.ts).
 * - `max-batch --gpu all`: one search per GPU.
 * Each gives what one thread gives (the same answers, trials and advice; tested in test/cli/engine-workers.test.ts).
 * A search starts the workers only when its second trial shows it will take seconds (kWorthWorkersMs). `memplan simulate` does not
 * use them: its variants are one simulation each, and a new thread, which loads and compiles the engine anew, takes
 * about as long to simulate one as the warm main thread takes for all of them (GPT-2 XL: four variants in about
 * 250 ms on the main thread).
 */
import { availableParallelism } from 'node:os';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import {
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

export class EngineWorkers {
  private readonly count: number;
  private readonly worthThreadsMs: number;
  private readonly workers: Worker[] = [];
  private readonly idle: Worker[] = [];
  private readonly queue: Queued[] = [];
  /** The last search's trials: simulated by the main thread, simulated ahead by workers, and of those the ones it used. */
  readonly lastSearch = { onMainThread: 0, ahead: 0, aheadUsed: 0 };

  /**
   * Up to `count` workers, started when a search's second trial shows it long enough (`worthThreadsMs`; a test
   * passes 0) or for `--gpu all`'s searches; none on one core: the main thread does the work itself.
   */
  constructor(count: number | undefined = undefined, options: { worthThreadsMs?: number } = {}) {
    count ??= defaultWorkers();
    this.count = count > 1 ? count : 0;
    this.worthThreadsMs = options.worthThreadsMs ?? kWorthWorkersMs;
  }

  /** The workers running. */
  get size(): number {
    return this.workers.length;
  }

  private start(): void {
    while (this.workers.length < this.count) {
      const worker = new Worker(workerUrl);
      this.workers.push(worker);
      this.idle.push(worker);
    }
  }

  /** Runs a job on the next free worker. */
  run<K extends Job['kind']>(job: Extract<Job, { kind: K }>): Promise<JobResults[K]> {
    return new Promise((resolve, reject) => {
      this.queue.push({ job, resolve: resolve as (r: never) => void, reject });
      this.dispatch();
    });
  }

  private dispatch(): void {
    while (this.idle.length > 0 && this.queue.length > 0) {
      const worker = this.idle.pop()!;
      const { job, resolve, reject } = this.queue.shift()!;
      const done = () => {
        worker.off('message', onMessage);
        worker.off('error', onError);
        this.idle.push(worker);
        this.dispatch();
      };
      const onMessage = (reply: Reply) => {
        done();
        if ('error' in reply) reject(new Error(`a simulation failed in a worker thread: ${reply.error}`));
        else resolve(reply.result as never);
      };
      const onError = (error: Error) => {
        done();
        reject(error);
      };
      worker.on('message', onMessage);
      worker.on('error', onError);
      worker.postMessage(job);
    }
  }

  /** The advice `advise(plan, options)` gives, each variant simulated by the next free worker. */
  async advise(plan: Plan, options: AdviceOptions): Promise<AdviceResult> {
    const setup = setUpAdvice(plan, options);
    // The variants' searches are about as long as the plan's: they run on the workers if it started them.
    if (this.size === 0) return rankAdvice(setup, setup.variants.map((v) => adviseVariant(setup, v, options.device)));
    const device = portableDevice(options.device);
    const outcomes: AdviceEvent[] = await Promise.all(setup.variants.map((variant) => this.run({ kind: 'variant', setup, variant, device })));
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
    const stats = { here: 0, ahead: 0, aheadUsed: 0 };
    const result = await searchOnPool(plan, options, { pool, worthWorkersMs: this.worthThreadsMs, pause: () => new Promise((resolve) => setImmediate(resolve)) }, stats);
    Object.assign(this.lastSearch, { onMainThread: stats.here, ahead: stats.ahead, aheadUsed: stats.aheadUsed });
    return result;
  }

  /** `findMaxBatch` of each (plan, options), one search per worker at a time. */
  async maxBatchEach(searches: readonly { plan: Plan; options: MaxBatchOptions }[]): Promise<MaxBatchResult[]> {
    this.start();
    if (this.size === 0) return searches.map(({ plan, options }) => findMaxBatch(plan, options));
    return Promise.all(searches.map(({ plan, options }) => this.run({ kind: 'search', plan, options: portableSearchOptions(options) })));
  }

  /** Stops the workers (the process can then exit). */
  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.terminate()));
  }
}

function portableSearchOptions({ device, catalog, trialOutcome: _host, ...rest }: MaxBatchOptions): PortableSearchOptions {
  return { ...rest, device: portableDevice(device), ...(catalog ? { catalog: catalog.map(portableDevice) } : {}) };
}
