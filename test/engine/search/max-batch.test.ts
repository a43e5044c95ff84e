/**
 * Whether a batch fits, and the largest that does, against real runs on an H100:
 * - test/fixtures/boundary: fresh-process runs at and around the predicted largest batch, under
 *   set_per_process_memory_fraction caps (resources/measure/memplan_measure.py `plan`);
 * - test/fixtures/maxbatch: searches run on the GPU as users run them (grow, bisect; every trial a few steps).
 */
import { readFileSync, readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { planGpu } from '../../../cli/gpus.ts';
import { parsePlan } from '../../../engine/plan/parse.ts';
import { findMaxBatch } from '../../../engine/search/max-batch.ts';
import { simulate } from '../../../engine/train/simulate.ts';

interface Measured {
  plan: { training: Record<string, unknown> } & Record<string, unknown>;
  status: 'ok' | 'oom';
  cap: { allowed_bytes: number };
  peak_allocated_bytes: number;
  peak_reserved_bytes: number;
}

/** The plan with the cap PyTorch enforced (fraction × total memory, truncated). */
function cappedPlan(m: { plan: unknown; cap: { allowed_bytes: number } }) {
  return parsePlan({ ...(m.plan as object), gpu: { memory_limit_bytes: m.cap.allowed_bytes } });
}

const boundaryDir = new URL('../../fixtures/boundary/', import.meta.url);
const boundary = readdirSync(boundaryDir).filter((f) => f.endsWith('.json')).sort();

/** Runs whose every allocation the engine reproduces: the verdict and the peaks must match exactly. */
const EXACT_BOUNDARY = /^(mlp_|layers_token_mlp_)/;

describe('fits or not, at the boundary', () => {
  it('has the recorded runs', () => expect(boundary.length).toBeGreaterThanOrEqual(10));
  for (const file of boundary) {
    it(file, () => {
      const m = JSON.parse(readFileSync(new URL(file, boundaryDir), 'utf8')) as Measured & { steps?: { skipped?: boolean }[] };
      const capped = cappedPlan(m);
      // Like with like: GradScaler skipped the steps the recording says it skipped (its random data overflowed)
      const skipped = (m.steps ?? []).findIndex((s) => !s.skipped);
      const leading = skipped === -1 ? (m.steps ?? []).length : skipped;
      const plan = { ...capped, training: { ...capped.training, grad_scaler_skipped_steps: leading } };
      // and the steps the recording ran (a recording of 3 steps says nothing of step 4).
      const r = simulate(plan, { device: planGpu(parsePlan(m.plan)), untilSteady: false });
      const predicted = r.oom === null ? 'ok' : 'oom';
      // Never promise a batch that runs out of memory.
      if (predicted === 'ok') expect(m.status).toBe('ok');
      if (EXACT_BOUNDARY.test(file)) {
        expect(predicted).toBe(m.status);
        if (m.status === 'ok') {
          expect(r.peak_allocated_bytes).toBe(m.peak_allocated_bytes);
          expect(r.peak_reserved_bytes).toBe(m.peak_reserved_bytes);
        }
      }
    });
  }
});

const searchDir = new URL('../../fixtures/maxbatch/', import.meta.url);

describe('steady state', () => {
  it('predicts the step-4 rise and the step-4 OOM a 3-step run cannot show', () => {
    const load = (b: number) => JSON.parse(readFileSync(new URL(`mlp_amp_bf16_adamw_foreach_cap3g_b${b}_6steps.json`, boundaryDir), 'utf8')) as Measured & {
      steps: { peak_reserved_bytes?: number }[];
    };
    const fits = load(6272);
    const r = simulate(cappedPlan(fits), { device: planGpu(parsePlan(fits.plan)) }); // to steady state
    expect(r.oom).toBeNull();
    // Per-step peaks as the 6-step run reported them (reserved rises again in step 4, then holds).
    expect(r.steps.map((s) => s.peak_reserved_bytes)).toEqual(fits.steps.slice(0, r.steps.length).map((s) => s.peak_reserved_bytes));
    expect(r.steps.length).toBeGreaterThanOrEqual(5);
    const ooms = load(6528);
    expect(ooms.status).toBe('oom');
    const plan3 = cappedPlan({ ...ooms, plan: { ...(ooms.plan as object), training: { ...ooms.plan.training, steps: 3 } } });
    expect(simulate(plan3, { device: planGpu(plan3), untilSteady: false }).oom).toBeNull(); // 3 steps fit
    const steady = simulate(plan3, { device: planGpu(plan3) });
    expect(steady.oom?.step).toBe(4); // the run to steady state does not
  });
});

describe('the largest batch against real searches', () => {
  // every recorded search: all families are simulated
  const simulated = readdirSync(searchDir).filter((f) => f.endsWith('.maxbatch.json')).sort();
  for (const file of simulated) {
    it(file, () => {
      const m = JSON.parse(readFileSync(new URL(file, searchDir), 'utf8')) as Measured & { max_batch: number };
      const plan = cappedPlan(m);
      // The real searches ran 3 steps per trial.
      const r = findMaxBatch(plan, { device: planGpu(parsePlan(m.plan)), untilSteady: false });
      // Never promise more than the real search found (2% tolerance, the target of issue #5).
      expect(r.max_batch).toBeLessThanOrEqual(Math.floor(m.max_batch * 1.02));
      // Near the boundary "fits" is not monotonic (amp_bf16: 6272 fits, 6273 does not, 6528 fits; all three
      // verified in fresh processes, test/fixtures/boundary), so a bisection's answer depends on what it probes.
      expect(r.max_batch).toBeGreaterThanOrEqual(Math.floor(m.max_batch * 0.95));
      expect(r.recommendation.batch).toBeLessThanOrEqual(r.max_batch);
      expect(r.effective_batch).toBe(r.max_batch * plan.training.grad_accumulation_steps);
      const fitting = r.trials.filter((t) => t.fits).map((t) => t.batch);
      expect(Math.max(...fitting)).toBe(r.max_batch);
      expect(r.trials.some((t) => t.batch === r.max_batch + 1 && !t.fits)).toBe(true);
    });
  }

  it('finds the real ResNet-50 AMP fp16 search, trial for trial, once GradScaler skips the steps it skipped', () => {
    // A fresh recording at the real search's answer (88) shows GradScaler skipped all 3 steps on its random data
    // (scale 65536 to 8192), so SGD never made its momentum buffers.
    const fresh = JSON.parse(readFileSync(new URL('resnet50_amp_fp16_cap4g_b88_fresh.json', boundaryDir), 'utf8')) as { steps: { skipped: boolean }[] };
    expect(fresh.steps.map((s) => s.skipped)).toEqual([true, true, true]);
    const m = JSON.parse(readFileSync(new URL('resnet50_amp_fp16_224.maxbatch.json', searchDir), 'utf8')) as Measured & { max_batch: number; trials: { batch: number; fits: boolean }[] };
    const plan = cappedPlan(m);
    const skipping = findMaxBatch({ ...plan, training: { ...plan.training, grad_scaler_skipped_steps: 3 } }, { device: planGpu(parsePlan(m.plan)), untilSteady: false });
    expect(skipping.max_batch).toBe(m.max_batch);
    const outcome = new Map(skipping.trials.map((t) => [t.batch, t.fits]));
    for (const t of m.trials) expect(outcome.get(t.batch), `batch ${t.batch}`).toBe(t.fits);
    // Steps that update (what a real run reaches once its scale settles) hold SGD's momentum buffers: fewer fit.
    expect(findMaxBatch(plan, { device: planGpu(parsePlan(m.plan)), untilSteady: false }).max_batch).toBeLessThan(m.max_batch);
  });

  it('finds exactly the batch the real search found', () => {
    for (const [file, expected] of [
      ['mlp_fp16_sgdm_fused_cap2g.maxbatch.json', 11776],
      ['mlp_amp_fp16_sgd_accum2_cap2_5g.maxbatch.json', 6144],
      ['mlp_fp32_adam_foreach_expandable_cap4g.maxbatch.json', 12634],
      ['mlp_amp_bf16_adamw_foreach_cap3g.maxbatch.json', 6528],
      ['layers_token_mlp_amp_bf16.maxbatch.json', 28],
      ['gpt2_small_amp_bf16_seq512.maxbatch.json', 8],
      ['gpt2_medium_amp_fp16_ckpt_seq1024.maxbatch.json', 9],
      ['llama_300m_bf16_ckpt_seq1024.maxbatch.json', 11],
      ['qwen2_5_0_5b_bf16_seq512.maxbatch.json', 7],
      ['bert_base_amp_bf16_seq256.maxbatch.json', 21],
      ['vit_b_16_amp_bf16_expandable.maxbatch.json', 72],
      ['layers_convnet_fp32_adam_128px.maxbatch.json', 43],
    ] as const) {
      const m = JSON.parse(readFileSync(new URL(file, searchDir), 'utf8')) as Measured & { max_batch: number };
      expect(m.max_batch).toBe(expected);
      expect(findMaxBatch(cappedPlan(m), { device: planGpu(parsePlan(m.plan)), untilSteady: false }).max_batch).toBe(expected);
      // To steady state the answer can only be smaller: a batch that fits for longer fits for 3 steps.
      expect(findMaxBatch(cappedPlan(m), { device: planGpu(parsePlan(m.plan)) }).max_batch).toBeLessThanOrEqual(expected);
    }
  });
});

describe('custom GPUs far larger than any real one', () => {
  // Segments are placed by the CUDA driver's rule up to 16 TiB; larger devices would have each expandable segment
  // reserve 1.125 times their memory of addresses, more than a process has (engine/train/simulate.ts). With the
  // driver's rule this 80-layer plan at 8,701 on 60 TiB ran out of simulated address space (an internal error)
  it('simulates a 70B-shaped plan with expandable segments at 8,701 on a 60 TiB GPU', () => {
    const plan = parsePlan({
      format: 'memplan.plan',
      version: 1,
      model: { hf_config: { model_type: 'llama', hidden_size: 8192, intermediate_size: 28672, num_hidden_layers: 80, num_attention_heads: 64, num_key_value_heads: 8, vocab_size: 32000, max_position_embeddings: 4096 } },
      training: { batch_size: 8701, seq_len: 4096, precision: 'bf16', optimizer: 'adamw', activation_checkpointing: 'non_reentrant' },
      gpu: { memory_limit_bytes: 60 * 2 ** 40 },
      allocator: { conf: 'expandable_segments:True' },
    });
    const r = simulate(plan, { device: planGpu(plan), timelinePoints: 0, peakDetails: false });
    expect(r.oom).toBeNull();
    expect(r.peak_reserved_bytes).toBeLessThanOrEqual(60 * 2 ** 40);
  }, 60_000);
});
