/**
 * Note [Replayed steps] (engine/train/step-replay.ts): a simulation whose later steps replay a recorded step's
 * requests through the allocator gives the same result as one that runs every step in full: every field, the
 * timeline event by event, the allocator's trace, on every calibration plan and every boundary-suite plan at and
 * just above its largest batch (where steps run out of memory, some after being replayed).
 */
import { readFileSync, readdirSync } from 'node:fs';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { parsePlan } from '../../../engine/plan/parse.ts';
import type { Plan } from '../../../engine/plan/schema.ts';
import { simulate, type SimulateOptions } from '../../../engine/train/simulate.ts';
import { StepProgram } from '../../../engine/train/step-replay.ts';
import { SecondStepProgram } from '../../../engine/train/second-step.ts';
import { forgetRecordedRuns } from '../../../engine/train/run-replay.ts';
import { planGpu } from '../../../cli/gpus.ts';
import { calibrationRuns, simulatedPlan } from './calibration-plans.ts';
import { loadSuite } from '../../../bench/boundary-suite.ts';

const replays = vi.spyOn(StepProgram.prototype, 'replay');
/** Note [Replayed second step]: the second step's forward and backward replayed from the first's. */
const secondSteps = vi.spyOn(SecondStepProgram.prototype, 'replay');
/** Every event of the timeline, not a decimated one. */
const kAllEvents = 2 ** 31;

function both(plan: Plan, options: Omit<SimulateOptions, 'device'>) {
  const device = planGpu(plan);
  const before = replays.mock.calls.length;
  const beforeSecond = secondSteps.mock.calls.length;
  const full = simulate(plan, { ...options, device, timelinePoints: kAllEvents, replaySteps: false });
  expect(replays.mock.calls.length).toBe(before);
  forgetRecordedRuns(); // the steps of this simulation replayed, not a whole run recorded before (run-replay.test.ts)
  const replayed = simulate(plan, { ...options, device, timelinePoints: kAllEvents, replaySteps: true });
  // A replay that ran out of memory and stood for the full step (Note [Replayed steps]: no frame that frees memory
  // was open), or left it to a full simulation (one was).
  const failed = replays.mock.results.slice(before).map((r, i) => (r.type === 'throw' ? (replays.mock.contexts[before + i] as StepProgram).oomAsFull : null)).filter((x) => x !== null);
  if (failed.some((asFull) => asFull)) replayedOomAsFull++;
  if (failed.some((asFull) => !asFull)) replayedOomUnwinding++;
  const second = secondSteps.mock.results.slice(beforeSecond);
  replayedSecondSteps += second.length;
  replayedSecondOom += second.filter((r) => r.type === 'throw' && (r.value as Error).name === 'OutOfMemoryError').length;
  return { full, replayed, replayedSteps: replays.mock.calls.length - before };
}


let replayedCases = 0;
let replayedSecondSteps = 0;
let replayedSecondOom = 0;
let replayedTrials = 0;
let replayedTrialOom = 0;
let replayedOom = 0;
let replayedOomAsFull = 0;
let replayedOomUnwinding = 0;

describe('replayed steps give the full simulation, field for field', () => {
  for (const { name, m } of calibrationRuns) {
    it(`calibration: ${name} (its steps and until steady; the allocator's trace)`, () => {
      const plan = simulatedPlan(m);
      if (!plan) return;
      for (const untilSteady of [false, true]) {
        const { full, replayed, replayedSteps } = both(plan, { untilSteady });
        expect(replayed).toEqual(full);
        if (replayedSteps > 0) replayedCases++;
      }
      const device = planGpu(plan);
      // with the labels the allocator was given: a replayed storage is allocated under its name at that point (a
      // gradient before AccumulateGrad renamed it), whatever it was called later; the first replays a whole run
      // (the one `both` recorded: Note [Replayed runs]), the second the steps (recorded again)
      const trace = (replaySteps: boolean) => {
        const events: string[] = [];
        simulate(plan, { device, timelinePoints: 0, replaySteps, onTrace: (action, addr, size, _stream, label) => events.push(`${action} ${addr} ${size} ${label ?? ''}`) });
        return events;
      };
      const fullTrace = trace(false);
      expect(trace(true)).toEqual(fullTrace);
      forgetRecordedRuns();
      expect(trace(true)).toEqual(fullTrace);
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
        // as a search's trial: no peak details, the replayed steps' blocks without storages
        const trial = both(at, { peakDetails: false, neededOnOom: false });
        expect(trial.replayed).toEqual(trial.full);
        if (trial.replayedSteps > 0) replayedTrials++;
        if (trial.replayedSteps > 0 && trial.full.oom && trial.full.oom.step > 2) replayedTrialOom++;
      }
    }, 60_000);
  }
});

describe('an out-of-memory error in a replayed step inside frames that free memory as they unwind', () => {
  it('is left to the full simulation (LoRA on Phi-3 with reentrant checkpointing, capped just under its peak)', () => {
    const c = loadSuite().find((x) => x.name === 'lora_phi3_4l_bf16_ckpt_reentrant_seq256_cap6g')!;
    const plan = parsePlan({ ...c.plan, training: { ...c.plan.training, batch_size: 1 } });
    const unwindingBefore = replayedOomUnwinding;
    // Found by scanning caps from 90% to 100% of the uncapped peak reserved: these fail in step 3 or later.
    for (const cap of [1_512_088_535, 1_531_277_475]) {
      const { full, replayed } = both({ ...plan, gpu: { memory_limit_bytes: cap } }, { peakDetails: true, neededOnOom: false });
      expect(full.oom?.step).toBeGreaterThan(2);
      expect(replayed).toEqual(full);
    }
    expect(replayedOomUnwinding - unwindingBefore).toBe(2);
  }, 60_000);
});

describe('code that frees memory when an exception unwinds it is known to the replay (Note [Replayed steps])', () => {
  // Every engine file with a `finally` or a `catch`, and why an out-of-memory error replayed through it is exact.
  // A new one must count itself in CudaDevice.unwindingFrames if it frees memory on an exception, or never be
  // replayed.
  const known: Record<string, string> = {
    'autograd/engine.ts': 'the recomputation runs in withScope (counted); the finally blocks restore modes',
    'models/checkpointing.ts': "rerunUnderAutocast's region exit frees its casts: counted",
    'models/block-recording.ts': "a replayed block's failing request inside frames its code would unwind is left to the simulation without reuse; the finally restores the frame count",
    'models/block-reuse.ts': 'restores the observer and the block tag after a recorded block',
    'models/hf/rotary.ts': 'restores autocast and grad mode, frees nothing',
    'models/hf/mixtral-moe.ts': 'pythonFrame drops its locals: counted',
    'models/peft/dora.ts': "a recomputation stopping inside a DoRA layer drops its adapter product's recomputed graph: counted",
    'models/peft/lora.ts': 'not in a simulation (a modules_to_save name checked as a regular expression)',
    'ops/conv.ts': "cuDNN's plan fallback: models with convolutions are never replayed",
    'tensor/cuda.ts': 'withScope: counted',
    'train/simulate.ts': 'where the simulation catches the error',
    'train/step-replay.ts': 'marks how a failing replayed request stands, then rethrows',
    'compare/attribution.ts': 'not in a simulation',
    'plan/limits.ts': 'not in a simulation',
    'plan/parse.ts': 'not in a simulation',
    'plan/schema.ts': 'not in a simulation (a target_modules pattern JavaScript cannot read)',
    'search/advice.ts': 'around whole simulations',
    'search/max-batch.ts': 'around whole simulations (a walk of the search stopping where a trial is not yet simulated)',
    'snapshot/gzip.ts': 'not in a simulation',
    'snapshot/pickle.ts': 'not in a simulation',
    'snapshot/replay.ts': 'not in a simulation',
    'snapshot/snapshot.ts': 'not in a simulation',
    'worker/host.ts': 'around whole simulations',
  };
  const engine = new URL('../../../engine/', import.meta.url);
  const files = (readdirSync(engine, { recursive: true }) as string[]).filter((f) => f.endsWith('.ts')).map((f) => f.split('\\').join('/'));
  it('every try/finally and catch in the engine is one of the known ones', () => {
    const handling = files.filter((f) => /\bfinally\b|\bcatch\s*\(/.test(readFileSync(new URL(f, engine), 'utf8'))).sort();
    expect(handling.filter((f) => !(f in known))).toEqual([]);
  });
});

afterAll(() => {
  // The second steps replayed (Note [Replayed second step]), out-of-memory errors in them included.
  expect(replayedSecondSteps).toBeGreaterThan(50);
  expect(replayedSecondOom).toBeGreaterThan(0);
  console.log(`replayed second steps: ${replayedSecondSteps}, ${replayedSecondOom} out of memory`);
  // The comparison proves something only where steps were replayed, out-of-memory errors in them included.
  expect(replayedCases).toBeGreaterThan(50);
  expect(replayedTrials).toBeGreaterThan(30);
  expect(replayedTrialOom).toBeGreaterThan(0);
  expect(replayedOom).toBeGreaterThan(0);
  console.log(`replayed out-of-memory errors: ${replayedOomAsFull} standing for the full step, ${replayedOomUnwinding} inside unwinding frames`);
  expect(replayedOomAsFull).toBeGreaterThan(0);
  expect(replayedOomUnwinding).toBeGreaterThan(0);
});
