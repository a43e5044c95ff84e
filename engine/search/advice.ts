/**
 * What to change when a plan does not fit, or to fit a larger batch: each variant of the plan is simulated
 * (not estimated) and the variants are ranked by the peak reserved memory they save, each with its cost.
 */
import { InputError } from '../errors.ts';
import type { Plan } from '../plan/schema.ts';
import { simulate, type DeviceSpec } from '../train/simulate.ts';
import { findMaxBatch } from './max-batch.ts';

export interface Variant {
  /** Short id, stable for the UI and tests. */
  id: string;
  /** What to change, in words. */
  change: string;
  /** What it costs. */
  cost: string;
  plan: Plan;
}

export interface Advice extends Omit<Variant, 'plan'> {
  peakAllocatedBytes: number;
  peakReservedBytes: number;
  /** Peak reserved saved against the plan as it is (negative: it uses more). */
  savedBytes: number;
  fits: boolean;
  /** The largest micro-batch with this change, and the effective batch it gives (only when asked for). */
  maxBatch?: number;
  effectiveBatch?: number;
}

function withTraining(plan: Plan, training: Partial<Plan['training']>): Plan {
  return { ...plan, training: { ...plan.training, ...training } };
}

/** The changes worth trying for this plan (those that change nothing are left out). */
export function variants(plan: Plan): Variant[] {
  const t = plan.training;
  const out: Variant[] = [];
  if (t.precision === 'fp32') {
    out.push({
      id: 'amp_bf16',
      change: 'train with autocast bf16 (precision "amp_bf16")',
      cost: 'needs a GPU with bf16 (Ampere or newer); numerics change slightly, fp32 weights are kept',
      plan: withTraining(plan, { precision: 'amp_bf16' }),
    });
  }
  if (t.activation_checkpointing === false) {
    out.push({
      id: 'checkpointing',
      change: 'turn on activation checkpointing (non-reentrant)',
      cost: 'recomputes each checkpointed block in backward: about a third more compute per step',
      plan: withTraining(plan, { activation_checkpointing: 'non_reentrant' }),
    });
  }
  if (t.optimizer !== 'sgd' && t.optimizer_impl !== 'fused') {
    out.push({
      id: 'fused_optimizer',
      change: `use the fused ${t.optimizer} (fused=True)`,
      cost: 'none in memory terms; needs parameters on a CUDA device in a floating-point dtype',
      plan: withTraining(plan, { optimizer_impl: 'fused' }),
    });
  }
  if (t.batch_size > 1) {
    const half = Math.floor(t.batch_size / 2);
    const steps = t.grad_accumulation_steps * 2;
    out.push({
      id: 'accumulation',
      change: `micro-batch ${half} with ${steps} accumulation steps (the same effective batch of ${half * steps})`,
      cost: 'each optimizer step takes more, smaller forward/backward passes: slower when the GPU was not saturated',
      plan: withTraining(plan, { batch_size: half, grad_accumulation_steps: steps }),
    });
  }
  if (!/expandable_segments:\s*True/i.test(plan.allocator.conf)) {
    const conf = plan.allocator.conf ? `${plan.allocator.conf},expandable_segments:True` : 'expandable_segments:True';
    out.push({
      id: 'expandable_segments',
      change: 'set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True',
      cost: 'none in compute; segments grow by mapping pages, which is slower the first time memory is reserved',
      plan: { ...plan, allocator: { conf } },
    });
  }
  if (t.attention === 'eager') {
    out.push({
      id: 'sdpa',
      change: 'use scaled_dot_product_attention (attention "sdpa")',
      cost: 'none: faster, and attention no longer keeps the [L, L] probabilities for backward',
      plan: withTraining(plan, { attention: 'sdpa' }),
    });
  }
  return out;
}

export interface AdviceOptions {
  device: DeviceSpec;
  /** The plan's own peak reserved, when the caller has simulated it already. */
  basePeakReservedBytes?: number;
  /** Also search each variant's largest micro-batch (slower). */
  withMaxBatch?: boolean;
}

/** Simulates each variant and ranks them by peak reserved memory saved. Variants the engine cannot simulate are left out. */
export function advise(plan: Plan, options: AdviceOptions): Advice[] {
  const basePeak = options.basePeakReservedBytes ?? simulate(plan, { device: options.device, timelinePoints: 0 }).peakReservedBytes;
  const advice: Advice[] = [];
  for (const v of variants(plan)) {
    let r;
    try {
      r = simulate(v.plan, { device: options.device, timelinePoints: 0 });
    } catch (error) {
      if (error instanceof InputError) continue; // not simulated yet for this model
      throw error;
    }
    const a: Advice = {
      id: v.id,
      change: v.change,
      cost: v.cost,
      peakAllocatedBytes: r.peakAllocatedBytes,
      peakReservedBytes: r.peakReservedBytes,
      savedBytes: basePeak - r.peakReservedBytes,
      fits: r.oom === null,
    };
    if (options.withMaxBatch) {
      const search = findMaxBatch(v.plan, { device: options.device });
      a.maxBatch = search.maxBatch;
      a.effectiveBatch = search.effectiveBatch;
    }
    advice.push(a);
  }
  return advice.sort((x, y) => Number(y.fits) - Number(x.fits) || y.savedBytes - x.savedBytes);
}
