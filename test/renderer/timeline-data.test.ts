/** A real simulation's timeline laid out for the chart: no peak lost, phases and steps where the engine says. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseGpuCatalog } from '../../engine/gpu/catalog.ts';
import { planGpu } from '../../engine/gpu/device.ts';
import { parsePlanText } from '../../engine/plan/parse.ts';
import { simulate } from '../../engine/train/simulate.ts';
import { layoutTimeline } from '../../renderer/src/charts/timeline-data.ts';

const root = new URL('../../', import.meta.url);
const plan = parsePlanText(readFileSync(new URL('examples/gpt2-config-json.plan.json', root), 'utf8'));
const catalog = parseGpuCatalog(JSON.parse(readFileSync(new URL('resources/gpus.json', root), 'utf8')));
const result = simulate(plan, { device: planGpu(plan, catalog) });
const t = result.timeline;

describe('the timeline chart layout', () => {
  it('marks the peaks the result reports', () => {
    const l = layoutTimeline(t, 'event');
    expect(t.allocated_max[l.peakAllocatedIndex]).toBe(result.peak_allocated_bytes);
    expect(t.reserved_max[l.peakReservedIndex]).toBe(result.peak_reserved_bytes);
    expect(t.step[l.peakAllocatedIndex]).toBe(result.peak_at.step);
  });

  it('shades phase runs that tile the whole run, and starts each step once', () => {
    for (const axis of ['event', 'step'] as const) {
      const l = layoutTimeline(t, axis);
      expect(l.runs[0]!.x0).toBe(l.x[0]);
      expect(l.runs.at(-1)!.x1).toBe(l.xEnd);
      for (let i = 1; i < l.runs.length; i++) {
        expect(l.runs[i]!.x0).toBe(l.runs[i - 1]!.x1);
        expect(l.runs[i]!.phase).not.toBe(l.runs[i - 1]!.phase);
      }
      expect(l.stepStarts.map((s) => s.step)).toEqual([...new Set(t.step)]);
      for (let i = 1; i < l.x.length; i++) expect(l.x[i]!).toBeGreaterThan(l.x[i - 1]!);
    }
  });

  it('puts step n in [n, n + 1) on the step axis, so plans line up step by step', () => {
    const l = layoutTimeline(t, 'step');
    for (let i = 0; i < l.x.length; i++) expect(Math.floor(l.x[i]!)).toBe(t.step[i]);
    expect(l.xEnd).toBe(t.step[t.step.length - 1]! + 1);
  });
});
