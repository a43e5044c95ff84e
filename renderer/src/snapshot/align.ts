/**
 * Putting a real run's timeline beside a plan's prediction on one axis. Pure (no DOM).
 *
 * The prediction runs the plan's steps and then more until the allocator's state repeats (engine/train/
 * steady-state.ts); a recorded run ran the steps its script ran, usually the plan's. So the prediction is cut after
 * the plan's steps, and the measurement is stretched over what is left: a real trace records each free twice
 * (requested, completed) and the segment calls, the simulation once, so the same step takes more events there.
 */
import type { Timeline } from '../../../engine/index.ts';

/** The timeline's points up to the end of step `steps` (step 0 is loading the model). */
export function firstSteps(t: Timeline, steps: number): Timeline {
  const cut = t.step.findIndex((s) => s > steps);
  if (cut < 0) return t;
  const slice = <T extends { slice(a: number, b: number): T }>(c: T) => c.slice(0, cut);
  return {
    ...t,
    // events count from 1 in a simulation: the cut point's first event is the first one left out
    events: t.event[cut]! - 1,
    event: slice(t.event),
    allocated_min: slice(t.allocated_min),
    allocated_max: slice(t.allocated_max),
    reserved_min: slice(t.reserved_min),
    reserved_max: slice(t.reserved_max),
    step: slice(t.step),
    phase: slice(t.phase),
    ...(t.real_reserved_min ? { real_reserved_min: slice(t.real_reserved_min) } : {}),
    ...(t.real_reserved_max ? { real_reserved_max: slice(t.real_reserved_max) } : {}),
  };
}

/** The measurement's events stretched over the reference's. */
export function stretchedTo(t: Timeline, reference: Timeline): Timeline {
  const scale = t.events > 0 ? reference.events / t.events : 1;
  return { ...t, event: t.event.map((e) => e * scale), events: reference.events };
}
