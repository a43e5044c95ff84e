/** The timeline's min/max decimation keeps every peak and dip, one step and phase per point, and survives JSON. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decimateTimeline, resultJsonReplacer, timelineSchema, TimelineRecorder } from '../../../engine/index.ts';

function record(events: { a: number; r: number; step: number; phase: string }[]) {
  const rec = new TimelineRecorder(1);
  for (const e of events) rec.push(e.a, e.r, e.step, e.phase);
  return rec.raw();
}

const event = fc.record({
  a: fc.integer({ min: 0, max: 2 ** 40 }),
  r: fc.integer({ min: 0, max: 2 ** 40 }),
  step: fc.integer({ min: 0, max: 4 }),
  phase: fc.constantFrom('load', 'forward', 'backward', 'optimizer'),
});

describe('timeline decimation', () => {
  it('keeps the maximum and minimum of allocated and reserved, whatever the number of points', () => {
    fc.assert(
      fc.property(fc.array(event, { minLength: 1, maxLength: 3000 }), fc.integer({ min: 1, max: 500 }), (events, limit) => {
        const t = decimateTimeline(record(events), limit);
        expect(Math.max(...t.allocated_max)).toBe(Math.max(...events.map((e) => e.a)));
        expect(Math.min(...t.allocated_min)).toBe(Math.min(...events.map((e) => e.a)));
        expect(Math.max(...t.reserved_max)).toBe(Math.max(...events.map((e) => e.r)));
        expect(Math.min(...t.reserved_min)).toBe(Math.min(...events.map((e) => e.r)));
        expect(t.events).toBe(events.length);
      }),
      { numRuns: 200 },
    );
  });

  it('gives each point the step and phase of all its events, and stays near the limit', () => {
    const events = Array.from({ length: 100_000 }, (_, i) => ({ a: (i * 7919) % 1000, r: 1000, step: 1 + Math.floor(i / 25_000), phase: ['forward', 'backward', 'optimizer'][Math.floor(i / 5000) % 3]! }));
    const raw = record(events);
    const t = decimateTimeline(raw, 2000);
    expect(t.event.length).toBeLessThanOrEqual(2000);
    expect(t.event.length).toBeGreaterThan(1500);
    for (let k = 0; k < t.event.length; k++) {
      const start = t.event[k]! - 1;
      const end = k + 1 < t.event.length ? t.event[k + 1]! - 1 : events.length;
      for (let j = start; j < end; j++) {
        expect(events[j]!.step).toBe(t.step[k]);
        expect(events[j]!.phase).toBe(t.phases[t.phase[k]!]);
      }
    }
  });

  it('keeps every event when there are fewer than the limit', () => {
    const t = decimateTimeline(record([{ a: 1, r: 2, step: 0, phase: 'load' }, { a: 3, r: 4, step: 1, phase: 'forward' }]), 2000);
    expect([...t.allocated_max]).toEqual([1, 3]);
    expect([...t.event]).toEqual([1, 2]);
    expect(t.phases).toEqual(['load', 'forward']);
  });

  it('writes plain arrays as JSON, which the schema turns back into typed arrays', () => {
    const t = decimateTimeline(record([{ a: 1, r: 2, step: 0, phase: 'load' }, { a: 3, r: 4, step: 1, phase: 'forward' }]), 10);
    const json = JSON.parse(JSON.stringify(t, resultJsonReplacer)) as { allocated_max: unknown };
    expect(json.allocated_max).toEqual([1, 3]);
    const back = timelineSchema.parse(json);
    expect(back.allocated_max).toBeInstanceOf(Float64Array);
    expect(back).toEqual(t);
    expect(timelineSchema.parse(structuredClone(t))).toEqual(t);
  });

  it('rejects columns of different lengths', () => {
    const t = decimateTimeline(record([{ a: 1, r: 2, step: 0, phase: 'load' }]), 10);
    expect(timelineSchema.safeParse({ ...t, reserved_max: [1, 2] }).success).toBe(false);
  });
});
