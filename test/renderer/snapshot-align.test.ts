/** A prediction cut to the plan's steps and a measurement stretched over it (renderer/src/snapshot/align.ts). */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseGpuCatalog } from '../../engine/gpu/catalog.ts';
import { planGpu } from '../../engine/gpu/device.ts';
import { safeParsePlan } from '../../engine/plan/parse.ts';
import { timelineSchema } from '../../engine/result/index.ts';
import { simulate } from '../../engine/train/simulate.ts';
import { firstSteps, stretchedTo } from '../../renderer/src/snapshot/align.ts';

const root = new URL('../../', import.meta.url);
const catalog = parseGpuCatalog(JSON.parse(readFileSync(new URL('resources/gpus.json', root), 'utf8')));
const json = JSON.parse(readFileSync(new URL('examples/mlp-fp16.plan.json', root), 'utf8')) as Record<string, unknown>;
const parsed = safeParsePlan({ ...json, training: { ...(json.training as object), steps: 2 } }, { catalog });
if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
const result = simulate(parsed.plan, { device: planGpu(parsed.plan, catalog) });

describe('aligning a real run with a prediction', () => {
  it('cuts the prediction after the plan’s steps, a valid timeline that ends where step 3 began', () => {
    expect(result.steps.length).toBeGreaterThan(2);
    const cut = firstSteps(result.timeline, 2);
    expect(timelineSchema.safeParse(cut).success).toBe(true);
    expect(Math.max(...cut.step)).toBe(2);
    expect(cut.event.length).toBeLessThan(result.timeline.event.length);
    const next = result.timeline.step.findIndex((s) => s > 2);
    expect(cut.events).toBe(result.timeline.event[next]! - 1);
    expect(cut.event.at(-1)!).toBeLessThanOrEqual(cut.events);
    // nothing to cut when the plan asks for every step simulated
    expect(firstSteps(result.timeline, result.steps.length)).toBe(result.timeline);
  });

  it('stretches a measurement over the prediction’s events', () => {
    const cut = firstSteps(result.timeline, 2);
    const measured = { ...cut, events: cut.events * 2, event: cut.event.map((e) => e * 2) };
    const stretched = stretchedTo(measured, cut);
    expect(stretched.events).toBe(cut.events);
    expect([...stretched.event]).toEqual([...cut.event]);
  });
});
