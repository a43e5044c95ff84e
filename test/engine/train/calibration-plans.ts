/**
 * The calibration recordings that ran to the end (test/fixtures/calibration/*.json, status ok), for tests that run
 * their plans through a faster path and compare with the full simulation (run-replay, step-replay).
 */
import { readFileSync, readdirSync } from 'node:fs';
import { expect } from 'vitest';
import { planGpu } from '../../../cli/gpus.ts';
import { InputError } from '../../../engine/errors.ts';
import { parsePlan } from '../../../engine/plan/parse.ts';
import type { Plan } from '../../../engine/plan/schema.ts';
import { simulate } from '../../../engine/train/simulate.ts';

const calibration = new URL('../../fixtures/calibration/', import.meta.url);

/** Each recording that ran to the end: its name and its measurement file (`plan` among its fields). */
export const calibrationRuns: { name: string; m: { plan: unknown; status: string } }[] = readdirSync(calibration)
  .filter((f) => f.endsWith('.json'))
  .sort()
  .map((f) => ({ name: f.replace(/\.json$/, ''), m: JSON.parse(readFileSync(new URL(f, calibration), 'utf8')) }))
  .filter(({ m }) => m.status === 'ok');

/** The recording's plan, or null when memplan refuses it (an InputError, asserted: nothing else may fail). */
export function simulatedPlan(m: { plan: unknown }): Plan | null {
  try {
    const plan = parsePlan(m.plan);
    simulate(plan, { device: planGpu(plan), timelinePoints: 0, untilSteady: false });
    return plan;
  } catch (error) {
    expect(error).toBeInstanceOf(InputError);
    return null;
  }
}
