/**
 * The boundary suite (test/fixtures/boundary-suite/suite.json, bench/boundary-suite.ts): real max-batch searches on
 * an H100 whose every trial ran 6 steps in a fresh process (issue 10; issue 14 added Qwen3, Phi-3, Mistral beyond
 * its sliding window and LoRA, GPT-2's included, then Qwen3-MoE, OLMo 2 and SmolLM3; 27 held-out cases, heldout_*: combinations of settings the suite did
 * not have, memplan unchanged for them, seven of them under the allocator settings of the posts on fragmentation, five
 * on the whole H100 at published sizes (two with expandable segments) and two on the whole of an H200, whose plans name it).
 * Targets (issue 10): memplan's largest batch is never above the largest that fit, at
 * most 2% below it (1 below under 50), and the simulated peak reserved at that batch is within 1% of the real one.
 * Cases with a `known_failure` say which allocation or behaviour differs; they are asserted to still miss, so that a
 * fix shows up here.
 */
import { describe, expect, it } from 'vitest';
import { evaluateCase, loadSuite } from '../../../bench/boundary-suite.ts';
import { planGpu } from '../../../cli/gpus.ts';
import { parsePlan } from '../../../engine/plan/parse.ts';
import { simulateTrial } from '../../../engine/search/max-batch.ts';

const suite = loadSuite();

describe('the boundary suite: fresh-process searches on an H100', () => {
  it('has at least 30 cases across families, precisions and caps', () => {
    expect(suite.length).toBeGreaterThanOrEqual(30);
    for (const c of suite) {
      const fits = c.trials.filter((t) => t.fits).map((t) => t.batch);
      expect(fits).toContain(c.largest_fresh);
      if (c.search_complete) for (const b of [1, 2, 3]) expect(c.trials.find((t) => t.batch === c.largest_fresh + b)?.fits).toBe(false);
    }
  });
  it("covers issue 14's families: qwen3, phi3, mixtral, mistral beyond its sliding window, LoRA on two with and without checkpointing", () => {
    const config = (c: (typeof suite)[number]) => (c.plan.model as { hf_config?: Record<string, unknown> }).hf_config ?? {};
    const types = new Set(suite.map((c) => config(c).model_type));
    expect(types).toContain('qwen3');
    expect(types).toContain('phi3');
    expect(types).toContain('mixtral');
    const beyondWindow = suite.filter((c) => config(c).model_type === 'mistral' && Number(config(c).sliding_window) < Number(c.plan.training.seq_len));
    expect(beyondWindow.length).toBeGreaterThan(0);
    const lora = suite.filter((c) => c.plan.training.lora);
    expect(new Set(lora.map((c) => config(c).model_type)).size).toBeGreaterThanOrEqual(2);
    const checkpointed = (c: (typeof suite)[number]) => (c.plan.training.activation_checkpointing ?? 'none') !== 'none';
    expect(lora.some(checkpointed)).toBe(true);
    expect(lora.some((c) => !checkpointed(c))).toBe(true);
  });
  it('covers the allocator settings the posts on fragmentation recommend, each under a cap (where garbage collection runs)', () => {
    const confs = suite.map((c) => (c.plan.allocator as { conf?: string } | undefined)?.conf ?? '');
    for (const key of ['expandable_segments:True', 'max_split_size_mb:', 'garbage_collection_threshold:', 'roundup_power2_divisions:']) {
      expect(confs.filter((conf) => conf.includes(key)).length, key).toBeGreaterThan(0);
    }
    // settings combined, as the posts combine them
    expect(confs.some((conf) => conf.includes('garbage_collection_threshold:') && conf.includes('max_split_size_mb:'))).toBe(true);
  });
  it('searches whole GPUs too, the H100 and an H200, with no cap (cudaMalloc runs out, past what the process holds outside PyTorch): Hugging Face models among them', () => {
    const whole = suite.filter((c) => c.cap_bytes === null);
    expect(whole.length).toBeGreaterThanOrEqual(6);
    expect(whole.filter((c) => 'hf_config' in (c.plan.model as object)).length).toBeGreaterThanOrEqual(4);
    expect(whole.some((c) => c.plan.training.lora)).toBe(true);
    // and a second GPU of the catalog, the H200, whole
    expect(whole.filter((c) => (c.plan.gpu as { name?: string } | undefined)?.name === 'h200').length).toBeGreaterThanOrEqual(2);
  });
  it('every fresh-process trial fits or runs out as memplan simulates it (6 steps), failing batches below a fitting one included', () => {
    let trials = 0;
    const outcomes: string[] = [];
    for (const c of suite) {
      const plan = parsePlan({ ...c.plan, training: { ...c.plan.training, steps: c.steps_per_trial } });
      const device = planGpu(plan);
      for (const t of c.trials) {
        trials++;
        const simulated = simulateTrial(plan, t.batch, { device, untilSteady: false });
        if (simulated.fits !== t.fits) outcomes.push(`${c.name} at ${t.batch}: ${t.fits ? 'fit' : 'ran out'} on the H100, ${simulated.fits ? 'fits' : 'runs out'} in memplan`);
      }
    }
    expect(outcomes).toEqual([]);
    // Phi-3 mini's full fine-tune under 40 GiB: 26 runs out in step 3's backward while 27 fits, on the H100 and in memplan
    const phi3 = suite.find((c) => c.name === 'phi3_mini_bf16_ckpt_adamw_seq1024_cap40g')!;
    expect(phi3.trials.find((t) => t.batch === 26)).toMatchObject({ fits: false, failed_in_step: 3 });
    expect(evaluateCase(phi3).unstableRegion).toBe('26-27');
    expect(trials).toBeGreaterThan(290);
    console.log(`boundary suite: ${trials} fresh-process trials, each fitting or running out as memplan simulates it`);
  }, 120_000);
  for (const c of suite) {
    it(`${c.name}${c.known_failure ? ' (known failure)' : ''}`, () => {
      const o = evaluateCase(c);
      if (c.known_failure) {
        expect(o.ok, `${c.name} now meets the targets: drop its known_failure`).toBe(false);
        return;
      }
      expect(o.predicted).toBeLessThanOrEqual(c.largest_fresh);
      expect(o.closeBelow).toBe(true);
      if (o.reservedError !== null) expect(o.reservedError).toBeLessThanOrEqual(0.01);
    }, 60_000);
  }
});
