/**
 * A simulated run's allocations with their lifetimes, for tests that check what a model allocates, what it keeps
 * for backward and when each is freed (test/engine/models/*.test.ts).
 */
import { readFileSync } from 'node:fs';
import { expect } from 'vitest';
import { planGpu } from '../../../cli/gpus.ts';
import { parsePlan } from '../../../engine/plan/parse.ts';
import type { Plan } from '../../../engine/plan/schema.ts';
import { comparableTrace } from '../../../engine/snapshot/compare.ts';
import { replaySnapshot } from '../../../engine/snapshot/replay.ts';
import { readSnapshotBytes } from '../../../engine/snapshot/snapshot.ts';
import { simulate } from '../../../engine/train/simulate.ts';
import type { SimulateResult } from '../../../engine/result/simulate.ts';

export interface Alloc {
  label: string;
  size: number;
  /** The trace event index of the allocation. */
  alloc: number;
  /** The trace event index of its free (Infinity: alive at the end). */
  free: number;
}

/** Every allocation of the plan's steps, in order, with its label and the events of its allocation and free. */
export function allocationsOf(plan: Plan): Alloc[] {
  const out: Alloc[] = [];
  const live = new Map<number, Alloc>();
  let i = 0;
  simulate(plan, {
    device: planGpu(plan),
    untilSteady: false,
    timelinePoints: 0,
    peakDetails: false,
    onTrace: (action, addr, size, _stream, label) => {
      i++;
      if (action === 'alloc') {
        const a = { label: label ?? '', size, alloc: i, free: Infinity };
        out.push(a);
        live.set(addr, a);
      } else if (action === 'free_completed' && live.has(addr)) {
        live.get(addr)!.free = i;
        live.delete(addr);
      }
    },
  });
  return out;
}

/** The first allocation with this label. */
export function first(all: Alloc[], label: string): Alloc {
  const a = all.find((x) => x.label === label);
  if (!a) throw new Error(`no allocation labelled ${label}`);
  return a;
}

/** The event where backward starts: the first gradient the step allocates. */
export const backwardStart = (all: Alloc[]) => all.find((x) => x.label.startsWith('grad of'))!.alloc;

/**
 * A trace's allocations and frees in order, without where segments came from (comparableTrace), up to its last run
 * of frees: a recording ends with the script tearing the model down, whose frees run together with the last step's.
 */
export function requestsOf(events: readonly { action: string; addr: number; size: number }[]): string[] {
  const all = comparableTrace(events).filter((e) => !e.startsWith('segment'));
  let end = all.length;
  while (end > 0 && all[end - 1]!.startsWith('free')) end--;
  return all.slice(0, end);
}

/**
 * A calibration recording (test/fixtures/calibration/NAME) and its plan simulated, each as comparableTrace gives it,
 * and where to compare them to: the recording ends with the script tearing the model down right after the last
 * zero_grad, whose frees then run together with the teardown's, so up to the simulation's last run of frees.
 */
export function recordedAndSimulated(name: string): { real: string[]; sim: string[]; end: number } {
  const dir = new URL('../../fixtures/calibration/', import.meta.url);
  const m = JSON.parse(readFileSync(new URL(`${name}.json`, dir), 'utf8')) as { plan: unknown };
  const real = comparableTrace(readSnapshotBytes(readFileSync(new URL(`${name}.pickle.gz`, dir))).trace);
  const events: { action: string; addr: number; size: number }[] = [];
  const plan = parsePlan(m.plan);
  simulate(plan, { device: planGpu(plan), untilSteady: false, onTrace: (action, addr, size) => events.push({ action, addr, size }) });
  const sim = comparableTrace(events);
  let end = sim.length;
  while (end > 0 && sim[end - 1]!.startsWith('free')) end--;
  return { real, sim, end };
}

/** A calibration recording's measurement (test/fixtures/calibration/NAME.json), the fields the model tests read. */
export interface Recording {
  plan: { training: Record<string, unknown> } & Record<string, unknown>;
  model: { parameter_count: number; trainable_parameter_count: number };
  peak_allocated_bytes: number;
  peak_reserved_bytes: number;
  /** Each step as it ran: GradScaler skips a step whose fp16 gradients overflowed (random data). */
  steps?: { skipped?: boolean }[];
  /** PYTORCH_CUDA_ALLOC_CONF as the run set it (null: PyTorch's defaults). */
  alloc_conf?: string | null;
  /** The cap set_per_process_memory_fraction imposed: `allowed_bytes` is the allocator's limit (null: none). */
  cap?: { allowed_bytes: number | null } | null;
}

/**
 * A recording's plan as it ran: in autocast fp16, with the steps GradScaler skipped on the recording's random data
 * (`grad_scaler_skipped_steps`; memplan's plans assume every step updates).
 */
export function recordedPlan(m: Recording): Record<string, unknown> {
  const skipped = m.steps?.filter((s) => s.skipped).length ?? 0;
  if (!skipped || m.plan.training['precision'] !== 'amp_fp16') return m.plan;
  return { ...m.plan, training: { ...m.plan.training, grad_scaler_skipped_steps: skipped } };
}

export function recording(name: string): Recording {
  return JSON.parse(readFileSync(new URL(`../../fixtures/calibration/${name}.json`, import.meta.url), 'utf8')) as Recording;
}

/**
 * A recording's plan simulated against it: the parameter count, the peak allocated within `allocatedError` and the
 * peak reserved to the byte, and under LoRA what trains as PEFT counts it (the plan's parameters less the base's).
 */
export function expectAsRecorded(name: string, allocatedError = 0): void {
  const m = recording(name);
  const plan = parsePlan(recordedPlan(m));
  const device = planGpu(plan);
  const r = simulate(plan, { device, untilSteady: false, timelinePoints: 0 });
  expect(r.model.parameter_count).toBe(m.model.parameter_count);
  expect(Math.abs(r.peak_allocated_bytes - m.peak_allocated_bytes) / m.peak_allocated_bytes).toBeLessThanOrEqual(allocatedError);
  expect(r.peak_reserved_bytes).toBe(m.peak_reserved_bytes);
  const { lora, ...full } = m.plan.training;
  if (lora) {
    const base = simulate(parsePlan({ ...m.plan, training: full }), { device, untilSteady: false, timelinePoints: 0, peakDetails: false });
    expect(r.model.parameter_count - base.model.parameter_count).toBe(m.model.trainable_parameter_count);
  }
}

/**
 * A recording whose plan asks for the allocations and frees the real run made, in its order (to the teardown),
 * while the CUDA driver placed some of its segments elsewhere (Note [cudaMalloc placement]: the host's mappings):
 * asserts the same requests, and that the real trace replayed with its own segment addresses peaks as PyTorch did.
 * Returns the simulation, for the caller's own bounds on its peaks.
 */
export function expectSameRequestsPlacedElsewhere(name: string): SimulateResult {
  const plan = parsePlan(recording(name).plan);
  const snapshot = readSnapshotBytes(readFileSync(new URL(`../../fixtures/calibration/${name}.pickle.gz`, import.meta.url)));
  const events: { action: string; addr: number; size: number }[] = [];
  const r = simulate(plan, { device: planGpu(plan), untilSteady: false, timelinePoints: 0, peakDetails: false, onTrace: (action, addr, size) => events.push({ action, addr, size }) });
  const real = requestsOf(snapshot.trace);
  expect(real.length).toBeGreaterThan(3000);
  expect(requestsOf(events)).toEqual(real);
  const m = recording(name);
  // replayed as it ran: its allocator settings, and its cap (garbage collection runs only under one)
  const replay = replaySnapshot(snapshot, { allocConf: m.alloc_conf ?? '', memoryLimitBytes: m.cap?.allowed_bytes ?? undefined });
  expect(replay.firstMismatch).toBeNull();
  expect(replay.simPeakAllocatedBytes).toBe(m.peak_allocated_bytes);
  expect(replay.simPeakReservedBytes).toBe(m.peak_reserved_bytes);
  return r;
}

/**
 * A recording asked for the same blocks in the same order and peaks as PyTorch did once replayed with its own
 * segment addresses (expectSameRequestsPlacedElsewhere); memplan's own placement reserves the same and allocates
 * `allocatedUnder` bytes less at the peak (a block of another rounded size where it lands).
 */
export function expectPlacedElsewhereAllocatingLess(name: string, allocatedUnder: number): void {
  const r = expectSameRequestsPlacedElsewhere(name);
  const m = recording(name);
  expect(r.peak_reserved_bytes).toBe(m.peak_reserved_bytes);
  expect(m.peak_allocated_bytes - r.peak_allocated_bytes).toBe(allocatedUnder);
}

/** A small BERT config.json with a head (`architecture`), for the classifier tests; `extra` overrides any key. */
export const smallBert = (architecture: string, extra: Record<string, unknown> = {}) => ({
  model_type: 'bert',
  architectures: [architecture],
  hidden_size: 64,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  intermediate_size: 128,
  vocab_size: 1000,
  ...extra,
});

/** A plan of a pasted config.json for the classifier tests: batch 4 of 32 tokens, bf16, AdamW, one step. */
export const planOf = (hf: Record<string, unknown>, training: Record<string, unknown> = {}) =>
  parsePlan({ format: 'memplan.plan', version: 1, model: { hf_config: hf }, training: { batch_size: 4, seq_len: 32, precision: 'bf16', optimizer: 'adamw', steps: 1, ...training } });
