/**
 * A result's timeline (engine/result/timeline.ts: min/max columns per bucket of allocator events) laid out for a
 * chart: x positions, the runs of one phase to shade, where each step starts and where the peak is.
 *
 * Two x axes: `event` (allocator events, one plan on its own) and `step` (step n spans [n, n + 1), so plans with
 * different event counts line up step by step when overlaid; loading the model is step 0).
 */
import type { Timeline } from '../../../engine/result/index.ts';

export type TimelineAxis = 'event' | 'step';

export interface PhaseRun {
  phase: string;
  x0: number;
  x1: number;
}

export interface TimelineLayout {
  x: Float64Array;
  /** Where the timeline ends (the last bucket's end). */
  xEnd: number;
  runs: PhaseRun[];
  /** The first x of each step (step 0, loading, included when present). */
  stepStarts: { step: number; x: number }[];
  /** Index of the bucket with the highest allocated_max, and of the highest reserved_max. */
  peakAllocatedIndex: number;
  peakReservedIndex: number;
}

export function layoutTimeline(t: Timeline, axis: TimelineAxis): TimelineLayout {
  const n = t.event.length;
  const lastEvent = t.events > 0 ? t.event[0]! + t.events : n > 0 ? t.event[n - 1]! + 1 : 1;
  const x = new Float64Array(n);
  if (axis === 'event') {
    x.set(t.event);
  } else {
    // step n's events are stretched over [n, n + 1)
    let i = 0;
    while (i < n) {
      const step = t.step[i]!;
      let j = i;
      while (j < n && t.step[j] === step) j++;
      const first = t.event[i]!;
      const end = j < n ? t.event[j]! : lastEvent;
      const span = Math.max(1, end - first);
      for (let k = i; k < j; k++) x[k] = step + (t.event[k]! - first) / span;
      i = j;
    }
  }
  const xEnd = axis === 'event' ? lastEvent : n > 0 ? t.step[n - 1]! + 1 : 1;
  const runs: PhaseRun[] = [];
  const stepStarts: { step: number; x: number }[] = [];
  let peakA = 0;
  let peakR = 0;
  for (let i = 0; i < n; i++) {
    if (i === 0 || t.step[i] !== t.step[i - 1]) stepStarts.push({ step: t.step[i]!, x: x[i]! });
    const phase = t.phases[t.phase[i]!] ?? '';
    const last = runs[runs.length - 1];
    if (last && last.phase === phase) last.x1 = i + 1 < n ? x[i + 1]! : xEnd;
    else runs.push({ phase, x0: x[i]!, x1: i + 1 < n ? x[i + 1]! : xEnd });
    if (t.allocated_max[i]! > t.allocated_max[peakA]!) peakA = i;
    if (t.reserved_max[i]! > t.reserved_max[peakR]!) peakR = i;
  }
  return { x, xEnd, runs, stepStarts, peakAllocatedIndex: peakA, peakReservedIndex: peakR };
}

/** {x, y} points of one column (Chart.js's internal format: no parsing needed). */
export function points(x: ArrayLike<number>, y: ArrayLike<number>): { x: number; y: number }[] {
  const out = new Array<{ x: number; y: number }>(x.length);
  for (let i = 0; i < x.length; i++) out[i] = { x: x[i]!, y: y[i]! };
  return out;
}
