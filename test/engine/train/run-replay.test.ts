/**
 * Note [Replayed runs] (engine/train/run-replay.ts): a plan simulated again in the same process, with other
 * allocator settings, another cap or none, replays the recorded requests through the allocator alone and gives
 * the full simulation's result: every field, the timeline event by event, on every calibration plan and every
 * boundary-suite plan at its largest batch, under the settings advice and the searches simulate again (expandable
 * segments, no cap on unbounded memory, the plan as it was) and under caps just below its peak (out of memory).
 */
import { afterAll, describe, expect, it, vi } from 'vitest';
import { parsePlan } from '../../../engine/plan/parse.ts';
import type { Plan } from '../../../engine/plan/schema.ts';
import { simulate, unboundedDevice, type SimulateOptions } from '../../../engine/train/simulate.ts';
import { RecordedRun, forgetRecordedRuns, programKey } from '../../../engine/train/run-replay.ts';
import type { DeviceSpec } from '../../../engine/gpu/device.ts';
import { planGpu } from '../../../cli/gpus.ts';
import { calibrationRuns, simulatedPlan } from './calibration-plans.ts';
import { loadSuite } from '../../../bench/boundary-suite.ts';

const runReplays = vi.spyOn(RecordedRun.prototype, 'replayLoad');
/** Every event of the timeline, not a decimated one. */
const kAllEvents = 2 ** 31;

let replayedRuns = 0;
let replayedOoms = 0;

/** The plan simulated once (recorded), then each variant replayed and simulated in full: the same result. */
function checkVariants(plan: Plan, device: DeviceSpec, options: Omit<SimulateOptions, 'device'>) {
  forgetRecordedRuns();
  const variants: { plan: Plan; device: DeviceSpec }[] = [
    { plan, device },
    { plan: { ...plan, allocator: { conf: plan.allocator.conf ? `${plan.allocator.conf},expandable_segments:True` : 'expandable_segments:True' } }, device },
    { plan: { ...plan, gpu: undefined } as Plan, device: unboundedDevice(device) },
  ];
  const recorded = simulate(plan, { ...options, device, timelinePoints: 0 }); // records the run
  // Caps just under what it reserves: runs out of memory in a replayed step (or stops before it), retries first.
  for (const f of [0.98, 0.995]) variants.push({ plan: { ...plan, gpu: { memory_limit_bytes: Math.max(2 ** 21, Math.floor(recorded.peak_reserved_bytes * f)) } }, device });
  for (const v of variants) {
    const before = runReplays.mock.calls.length;
    const replayed = simulate(v.plan, { ...options, device: v.device, timelinePoints: kAllEvents });
    const full = simulate(v.plan, { ...options, device: v.device, timelinePoints: kAllEvents, replaySteps: false });
    expect(replayed).toEqual(full);
    if (runReplays.mock.calls.length > before) {
      replayedRuns++;
      if (full.oom) replayedOoms++;
    }
  }
}


describe('a replayed run gives the full simulation, field for field', () => {
  for (const { name, m } of calibrationRuns) {
    it(`calibration: ${name} (as it is, with expandable segments, without a cap)`, () => {
      const plan = simulatedPlan(m);
      if (!plan) return;
      checkVariants(plan, planGpu(plan), { peakDetails: true });
    }, 60_000);
  }

  for (const c of loadSuite()) {
    it(`boundary suite: ${c.name} at its largest batch`, () => {
      const plan = parsePlan({ ...c.plan, training: { ...c.plan.training, steps: c.steps_per_trial, batch_size: c.largest_fresh } });
      checkVariants(plan, planGpu(plan), { peakDetails: true, neededOnOom: false });
    }, 60_000);
  }
});

describe('what decides a program', () => {
  it('the allocator settings, the cap and the memory do not; the model, the training and what the ops read do', () => {
    const plan = parsePlan({ format: 'memplan.plan', version: 1, model: { preset: 'gpt2' }, training: { batch_size: 2, seq_len: 128, precision: 'bf16' }, gpu: { memory_limit_bytes: 2 ** 33 } });
    const device = planGpu(plan);
    const key = programKey(plan, device);
    expect(programKey({ ...plan, allocator: { conf: 'expandable_segments:True' }, gpu: undefined } as Plan, { ...device, total_memory_bytes: 2 ** 46, non_pytorch_bytes: 0 })).toBe(key);
    expect(programKey({ ...plan, training: { ...plan.training, batch_size: 3 } }, device)).not.toBe(key);
    expect(programKey(plan, { ...device, compute_capability: [8, 0] })).not.toBe(key);
    expect(programKey(plan, { ...device, multi_processor_count: device.multi_processor_count + 1 })).not.toBe(key);
    expect(programKey(plan, { ...device, cublas_workspace_bytes: 8_519_680 })).not.toBe(key);
  });
});

afterAll(() => {
  // The comparison proves something only where runs were replayed, out-of-memory errors in them included.
  console.log(`replayed runs: ${replayedRuns}, ${replayedOoms} of them out of memory`);
  expect(replayedRuns).toBeGreaterThan(100);
  expect(replayedOoms).toBeGreaterThan(20);
});
