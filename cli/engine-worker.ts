/**
 * A worker thread of the CLI (cli/engine-workers.ts): runs one job at a time (a variant advice tries, one trial of
 * a search, a whole search) as the main thread would, and posts back what it gives.
 */
import * as nodeModule from 'node:module';
import { parentPort } from 'node:worker_threads';
import { InputError, adviseVariant, findMaxBatch, simulateTrial, type AdviceEvent, type AdviceSetup, type DeviceSpec, type MaxBatchOptions, type MaxBatchResult, type Plan, type TrialOutcome, type Variant } from '../engine/index.ts';
import { convWorkspaceData } from './gpus.ts';

nodeModule.enableCompileCache?.(); // Note [Compile cache] (cli/memplan.ts): this thread loads the engine again

/** A device as it crosses threads: without its convolution table, which each thread reads from disk once. */
export type PortableDevice = Omit<DeviceSpec, 'conv_workspaces'> & { conv_table: boolean };

/** Search options as they cross threads. */
export type PortableSearchOptions = Omit<MaxBatchOptions, 'device' | 'catalog' | 'trialOutcome'> & { device: PortableDevice; catalog?: PortableDevice[] };

/** A job for a worker: a variant advice tries, one trial of a search, or a whole search. */
export type Job =
  | { kind: 'variant'; setup: AdviceSetup; variant: Variant; device: PortableDevice }
  | { kind: 'trial'; plan: Plan; batch: number; options: PortableSearchOptions }
  | { kind: 'search'; plan: Plan; options: PortableSearchOptions };

/** What each job gives. */
export interface JobResults {
  variant: AdviceEvent;
  trial: TrialOutcome;
  search: MaxBatchResult;
}

/**
 * What comes back: the job's result, or the error that stopped it: bad input (an InputError, rebuilt on the main
 * thread: exit 2 with its field) or an internal error (exit 1, its stack kept).
 */
export type Reply = { result: JobResults[Job['kind']] } | { error: { input: { where: string; problem: string } | null; message: string; stack: string | undefined } };

/** A device to send to a worker. */
export function portableDevice(device: DeviceSpec): PortableDevice {
  const { conv_workspaces: table, ...rest } = device;
  return { ...rest, conv_table: table !== null && table !== undefined };
}

/** A device a worker received, with this thread's convolution table. */
export function deviceOf({ conv_table: table, ...rest }: PortableDevice): DeviceSpec {
  return { ...rest, conv_workspaces: table ? convWorkspaceData() : null };
}

function searchOptions({ device, catalog, ...rest }: PortableSearchOptions): MaxBatchOptions {
  return { ...rest, device: deviceOf(device), ...(catalog ? { catalog: catalog.map(deviceOf) } : {}) };
}

function run(job: Job): JobResults[Job['kind']] {
  if (job.kind === 'variant') return adviseVariant(job.setup, job.variant, deviceOf(job.device));
  if (job.kind === 'trial') return simulateTrial(job.plan, job.batch, searchOptions(job.options));
  return findMaxBatch(job.plan, searchOptions(job.options));
}

parentPort?.on('message', (job: Job) => {
  let reply: Reply;
  try {
    reply = { result: run(job) };
  } catch (error) {
    const input = error instanceof InputError ? { where: error.where, problem: error.problem } : null;
    reply = { error: { input, message: error instanceof Error ? error.message : String(error), stack: error instanceof Error ? error.stack : undefined } };
  }
  parentPort!.postMessage(reply);
});
