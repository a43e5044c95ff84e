/**
 * Note [Replayed steps] (engine/train/step-replay.ts): a simulation whose later steps replay a recorded step's
 * requests through the allocator gives the same result as one that runs every step in full: every field, the
 * timeline event by event, the allocator's trace, on every calibration plan and every boundary-suite plan at and
 * just above its largest batch (where steps run out of memory, some after being replayed).
 */
import { readFileSync, readdirSync } from 'node:fs';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { InputError } from '../../../engine/errors.ts';
import { parsePlan } from '../../../engine/plan/parse.ts';
import type { Plan } from '../../../engine/plan/schema.ts';
import { simulate, type SimulateOptions } from '../../../engine/train/simulate.ts';
import { StepProgram } from '../../../engine/train/step-replay.ts';
import { planGpu } from '../../../cli/gpus.ts';
import { loadSuite } from '../../../bench/boundary-suite.ts';

const replays = vi.spyOn(StepProgram.prototype, 'replay');
/** Every event of the timeline, not a decimated one. */
const kAllEvents = 2 ** 31;

function both(plan: Plan, options: Omit<SimulateOptions, 'device'>) {
  const device = planGpu(plan);
  const before = replays.mock.calls.length;
  const full = simulate(plan, { ...options, device, timelinePoints: kAllEvents, replaySteps: false });
  expect(replays.mock.calls.length).toBe(before);
  const replayed = simulate(plan, { ...options, device, timelinePoints: kAllEvents, replaySteps: true });
  return { full, replayed, replayedSteps: replays.mock.calls.length - before };
}

const calibration = new URL('../../fixtures/calibration/', import.meta.url);
const calibrationPlans = readdirSync(calibration)
  .filter((f) => f.endsWith('.json'))
  .sort()
  .map((f) => ({ name: f.replace(/\.json$/, ''), m: JSON.parse(readFileSync(new URL(f, calibration), 'utf8')) }))
  .filter(({ m }) => m.status === 'ok');

let replayedCases = 0;
let replayedOom = 0;

describe('replayed steps give the full simulation, field for field', () => {
  for (const { name, m } of calibrationPlans) {
    it(`calibration: ${name} (its steps and until steady; the allocator's trace)`, () => {
      let plan: Plan;
      try {
        plan = parsePlan(m.plan);
        simulate(plan, { device: planGpu(plan), timelinePoints: 0, untilSteady: false });
      } catch (error) {
        expect(error).toBeInstanceOf(InputError);
        return;
      }
      for (const untilSteady of [false, true]) {
        const { full, replayed, replayedSteps } = both(plan, { untilSteady });
        expect(replayed).toEqual(full);
        if (replayedSteps > 0) replayedCases++;
      }
      const device = planGpu(plan);
      const trace = (replaySteps: boolean) => {
        const events: string[] = [];
        simulate(plan, { device, timelinePoints: 0, replaySteps, onTrace: (action, addr, size) => events.push(`${action} ${addr} ${size}`) });
        return events;
      };
      expect(trace(true)).toEqual(trace(false));
    }, 60_000);
  }

  for (const c of loadSuite()) {
    it(`boundary suite: ${c.name} at its largest batch and the 3 above`, () => {
      const plan = parsePlan({ ...c.plan, training: { ...c.plan.training, steps: c.steps_per_trial } });
      for (let batch = c.largest_fresh; batch <= c.largest_fresh + 3; batch++) {
        const at = { ...plan, training: { ...plan.training, batch_size: batch } };
        const { full, replayed, replayedSteps } = both(at, { peakDetails: true, neededOnOom: false });
        expect(replayed).toEqual(full);
        if (replayedSteps > 0) replayedCases++;
        if (replayedSteps > 0 && full.oom && full.oom.step > 2) replayedOom++;
      }
    }, 60_000);
  }
});

afterAll(() => {
  // The comparison proves something only where steps were replayed, out-of-memory errors in them included.
  expect(replayedCases).toBeGreaterThan(50);
  expect(replayedOom).toBeGreaterThan(0);
});
