/**
 * The timeline of allocated and reserved bytes, one type for a simulation and a snapshot replay.
 *
 * Note [Timeline columns]: a timeline is columns, not an array of points: typed arrays (Float64Array for bytes)
 * that a Web Worker can post (structured clone copies them cheaply; their buffers can also be transferred) and a
 * chart can read without building 100,000 objects. Each point is a bucket of consecutive events; it keeps the
 * minimum and the maximum of both allocated and reserved bytes over its events, so no peak (and no dip) disappears
 * when 100,000 events become 2,000 points. A bucket never spans two (step, phase) runs, so every point has one step
 * and one phase (an index into `phases`), which is what a chart shades and marks.
 *
 * Note [Timeline JSON]: JSON has no typed arrays. `--json` and the SQLite rows write the columns as plain arrays of
 * numbers (`resultJsonReplacer`), and the schema accepts both forms, turning plain arrays back into typed arrays:
 * `simulateResultSchema.parse(JSON.parse(text))` gives the same type the engine returns.
 */
import { z } from 'zod';
import { count } from './common.ts';

/** Points a timeline is decimated to unless the caller asks otherwise (a chart ~2,000 pixels wide). */
export const DEFAULT_TIMELINE_POINTS = 2000;

function column<T extends Float64Array | Uint32Array | Uint8Array>(make: { from(xs: ArrayLike<number>): T; new (n: number): T }, element: z.ZodNumber) {
  return z
    .union([z.instanceof(make as unknown as new (n: number) => T), z.array(element)])
    .transform((v): T => (Array.isArray(v) ? make.from(v) : (v as T)));
}

const bytesColumn = () => column(Float64Array, z.number().nonnegative());

export const timelineSchema = z
  .object({
    /** Events recorded before decimation (allocations and frees; trace entries for a replay). */
    events: count,
    /** Phase names; `phase[i]` indexes this list (a replay has the single phase "trace"). */
    phases: z.array(z.string()),
    /** The first event of each point's bucket (events count from 1 in a simulation, from 0 in a replay's trace). */
    event: column(Float64Array, z.number().int().nonnegative()),
    allocated_min: bytesColumn(),
    allocated_max: bytesColumn(),
    reserved_min: bytesColumn(),
    reserved_max: bytesColumn(),
    /** The training step of each point (0: loading the model; always 0 in a replay). */
    step: column(Uint32Array, z.number().int().nonnegative()),
    phase: column(Uint8Array, z.number().int().nonnegative()),
    /** A replay only: what the real run reserved over the same bucket. */
    real_reserved_min: bytesColumn().optional(),
    real_reserved_max: bytesColumn().optional(),
  })
  .superRefine((t, ctx) => {
    const n = t.event.length;
    for (const key of ['allocated_min', 'allocated_max', 'reserved_min', 'reserved_max', 'step', 'phase', 'real_reserved_min', 'real_reserved_max'] as const) {
      const c = t[key];
      if (c !== undefined && c.length !== n) ctx.addIssue({ code: 'custom', path: [key], message: `has ${c.length} entries, expected ${n} (one per point)` });
    }
    if (t.phase.some((p) => p >= t.phases.length)) ctx.addIssue({ code: 'custom', path: ['phase'], message: 'indexes past the phases list' });
  });

export type Timeline = z.output<typeof timelineSchema>;

/** A recorded, undecimated timeline: one entry per event (views into the recorder's columns). */
export interface RawTimeline {
  length: number;
  allocated: ArrayLike<number>;
  reserved: ArrayLike<number>;
  step: ArrayLike<number>;
  phase: ArrayLike<number>;
  phases: readonly string[];
  /** A replay: the real run's reserved bytes after each event. */
  realReserved?: ArrayLike<number>;
  /** The number of the first event (1 in a simulation, 0 in a replay). */
  firstEvent: number;
}

/** Growable typed columns for recording a timeline event by event: one event costs no object. */
export class TimelineRecorder {
  private allocated = new Float64Array(1 << 12);
  private reserved = new Float64Array(1 << 12);
  private realReserved: Float64Array | null;
  private steps = new Uint32Array(1 << 12);
  private phases = new Uint8Array(1 << 12);
  private readonly phaseNames: string[] = [];
  private lastPhase = '';
  private lastPhaseIndex = -1;
  private length = 0;
  private readonly firstEvent: number;

  constructor(firstEvent: number, withRealReserved = false) {
    this.firstEvent = firstEvent;
    this.realReserved = withRealReserved ? new Float64Array(1 << 12) : null;
  }

  push(allocatedBytes: number, reservedBytes: number, step: number, phase: string, realReservedBytes = 0): void {
    if (this.length === this.allocated.length) this.grow();
    if (phase !== this.lastPhase || this.lastPhaseIndex < 0) {
      let p = this.phaseNames.indexOf(phase);
      if (p < 0) p = this.phaseNames.push(phase) - 1;
      this.lastPhase = phase;
      this.lastPhaseIndex = p;
    }
    const i = this.length++;
    this.allocated[i] = allocatedBytes;
    this.reserved[i] = reservedBytes;
    this.steps[i] = step;
    this.phases[i] = this.lastPhaseIndex;
    if (this.realReserved) this.realReserved[i] = realReservedBytes;
  }

  private grow(): void {
    const n = this.allocated.length * 2;
    const grown = <T extends Float64Array | Uint32Array | Uint8Array>(a: T, b: T): T => {
      b.set(a);
      return b;
    };
    this.allocated = grown(this.allocated, new Float64Array(n));
    this.reserved = grown(this.reserved, new Float64Array(n));
    this.steps = grown(this.steps, new Uint32Array(n));
    this.phases = grown(this.phases, new Uint8Array(n));
    if (this.realReserved) this.realReserved = grown(this.realReserved, new Float64Array(n));
  }

  raw(): RawTimeline {
    const n = this.length;
    return {
      length: n,
      allocated: this.allocated.subarray(0, n),
      reserved: this.reserved.subarray(0, n),
      step: this.steps.subarray(0, n),
      phase: this.phases.subarray(0, n),
      phases: [...this.phaseNames],
      realReserved: this.realReserved?.subarray(0, n),
      firstEvent: this.firstEvent,
    };
  }
}

/** An empty timeline (a search's trials record none). */
export function emptyTimeline(): Timeline {
  return decimateTimeline({ length: 0, allocated: [], reserved: [], step: [], phase: [], phases: [], firstEvent: 1 }, 0);
}

/**
 * Min/max decimation to about `limit` points (Note [Timeline columns]). Buckets are equal runs of events, cut
 * where the step or phase changes; the bucket size leaves room for those cuts, so the result has at most `limit`
 * points unless the plan has more (step, phase) runs than that (then one point per run and bucket).
 */
export function decimateTimeline(raw: RawTimeline, limit: number): Timeline {
  const n = limit <= 0 ? 0 : raw.length;
  let runs = 0;
  for (let i = 1; i < n; i++) if (raw.step[i] !== raw.step[i - 1] || raw.phase[i] !== raw.phase[i - 1]) runs++;
  const size = n <= limit ? 1 : Math.max(1, Math.ceil(n / Math.max(1, limit - runs - 1)));
  const starts: number[] = [];
  for (let i = 0; i < n; ) {
    starts.push(i);
    const end = Math.min(n, i + size);
    let j = i + 1;
    while (j < end && raw.step[j] === raw.step[i] && raw.phase[j] === raw.phase[i]) j++;
    i = j;
  }
  const m = starts.length;
  const t = {
    events: raw.length,
    phases: [...raw.phases],
    event: new Float64Array(m),
    allocated_min: new Float64Array(m),
    allocated_max: new Float64Array(m),
    reserved_min: new Float64Array(m),
    reserved_max: new Float64Array(m),
    step: new Uint32Array(m),
    phase: new Uint8Array(m),
  };
  const real = raw.realReserved ? { min: new Float64Array(m), max: new Float64Array(m) } : null;
  for (let k = 0; k < m; k++) {
    const start = starts[k]!;
    const end = k + 1 < m ? starts[k + 1]! : n;
    let aMin = Infinity, aMax = -Infinity, rMin = Infinity, rMax = -Infinity, qMin = Infinity, qMax = -Infinity;
    for (let j = start; j < end; j++) {
      const a = raw.allocated[j]!;
      const r = raw.reserved[j]!;
      if (a < aMin) aMin = a;
      if (a > aMax) aMax = a;
      if (r < rMin) rMin = r;
      if (r > rMax) rMax = r;
      if (raw.realReserved) {
        const q = raw.realReserved[j]!;
        if (q < qMin) qMin = q;
        if (q > qMax) qMax = q;
      }
    }
    t.event[k] = start + raw.firstEvent;
    t.allocated_min[k] = aMin;
    t.allocated_max[k] = aMax;
    t.reserved_min[k] = rMin;
    t.reserved_max[k] = rMax;
    t.step[k] = raw.step[start]!;
    t.phase[k] = raw.phase[start]!;
    if (real) {
      real.min[k] = qMin;
      real.max[k] = qMax;
    }
  }
  return real ? { ...t, real_reserved_min: real.min, real_reserved_max: real.max } : t;
}
