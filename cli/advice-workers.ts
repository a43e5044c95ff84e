/**
 * Advice on every core, for `memplan max-batch`. Under the `batch` goal each variant advice tries
 * (engine/search/advice.ts) is a search of its own, tens of simulations: its outcome depends on its plan and the
 * plan's own search only, so the CLI searches the variants in worker threads, as many at once as the machine has
 * cores (`os.availableParallelism()`), and ranks them as `advise` does: the same advice as one variant after
 * another. The workers start with the command and load the engine while the main thread runs the plan's search.
 * `memplan simulate` does not use them: its variants are one simulation each, and a new thread, which loads and
 * compiles the engine anew, takes longer to simulate one than the warm main thread takes for all of them (GPT-2
 * XL: four variants in about 250 ms on the main thread; a worker's start-up and first simulation about as long).
 */
import { availableParallelism } from 'node:os';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { adviseVariant, rankAdvice, setUpAdvice, type AdviceEvent, type AdviceOptions, type AdviceResult } from '../engine/index.ts';
import type { VariantReply, VariantRequest } from './advice-worker.ts';

/** Variants advice tries at most (engine/search/advice.ts's planVariants and LoRA): no more workers than that. */
const kMaxVariants = 6;

/** The worker's module: cli/advice-worker.ts run from source, dist/cli/advice-worker.js once built. */
const workerUrl = new URL(`./advice-worker${extname(fileURLToPath(import.meta.url))}`, import.meta.url);

export class AdviceWorkers {
  private readonly workers: Worker[];

  /** Starts the workers now (none on one core: the main thread simulates the variants itself). */
  constructor(count = Math.min(kMaxVariants, availableParallelism())) {
    this.workers = count > 1 ? Array.from({ length: count }, () => new Worker(workerUrl)) : [];
  }

  /** The advice `advise(plan, options)` gives, each variant simulated by the next free worker. */
  async advise(plan: Parameters<typeof setUpAdvice>[0], options: AdviceOptions): Promise<AdviceResult> {
    const setup = setUpAdvice(plan, options);
    if (this.workers.length === 0) return rankAdvice(setup, setup.variants.map((v) => adviseVariant(setup, v, options.device)));
    const { conv_workspaces: table, ...device } = options.device;
    const outcomes = new Array<AdviceEvent>(setup.variants.length);
    let next = 0;
    const work = async (worker: Worker): Promise<void> => {
      while (next < setup.variants.length) {
        const k = next++;
        const request: VariantRequest = { setup, variant: setup.variants[k]!, device, convTable: table !== null && table !== undefined };
        outcomes[k] = await simulateOn(worker, request);
      }
    };
    await Promise.all(this.workers.map(work));
    return rankAdvice(setup, outcomes);
  }

  /** Stops the workers (the process can then exit). */
  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.terminate()));
  }
}

function simulateOn(worker: Worker, request: VariantRequest): Promise<AdviceEvent> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error) => {
      worker.off('message', onMessage);
      reject(error);
    };
    const onMessage = (reply: VariantReply) => {
      worker.off('error', onError);
      if ('error' in reply) reject(new Error(`a variant's simulation failed in an advice worker: ${reply.error}`));
      else resolve(reply.outcome);
    };
    worker.once('message', onMessage);
    worker.once('error', onError);
    worker.postMessage(request);
  });
}
