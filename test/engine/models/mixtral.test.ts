/**
 * Mixtral's sparse mixture of experts as transformers 5.17 trains it (engine/models/hf/mixtral-moe.ts): the router,
 * the grouped_mm experts (the default experts implementation), what each op keeps for backward and how large it
 * is, the 3-D weights' gradients, the configs it reads or refuses, the caveats, and the real largest batch of an H100
 * search. test/engine/train/calibration.test.ts compares 3 H100 recordings event by event.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { resolveHfConfig } from '../../../engine/models/hf/config.ts';
import { parsePlan } from '../../../engine/plan/parse.ts';
import { simulate } from '../../../engine/train/simulate.ts';
import { findMaxBatch } from '../../../engine/search/max-batch.ts';
import { radixSortTempBytes } from '../../../engine/ops/cub.ts';
import { planGpu } from '../../../cli/gpus.ts';
import { allocationsOf, backwardStart, first, requestsOf, type Alloc } from './allocations.ts';
import { caveatsText } from '../../../cli/caveats.ts';
import { readSnapshotBytes } from '../../../engine/snapshot/snapshot.ts';
import { replaySnapshot } from '../../../engine/snapshot/replay.ts';

const B = 2;
const T = 128;
const N = B * T; // tokens
const E = 8;
const K = 2;
const S = N * K; // routed rows
const H = 256;
const I = 512;
const small = (extra: Record<string, unknown> = {}) => ({
  model_type: 'mixtral',
  hidden_size: H,
  intermediate_size: I,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  vocab_size: 4096,
  num_local_experts: E,
  num_experts_per_tok: K,
  ...extra,
});


function planOf(hf: Record<string, unknown>, training: Record<string, unknown> = {}, gpu: Record<string, unknown> = {}) {
  return parsePlan({ format: 'memplan.plan', version: 1, model: { hf_config: hf }, training: { batch_size: B, seq_len: T, precision: 'bf16', optimizer: 'sgd', steps: 1, ...training }, ...(Object.keys(gpu).length ? { gpu } : {}) });
}

/** Every allocation of one step with its label and the event indices of its allocation and free. */
function allocations(hf: Record<string, unknown>, training: Record<string, unknown> = {}, gpu: Record<string, unknown> = {}): Alloc[] {
  return allocationsOf(planOf(hf, training, gpu));
}

const L0 = 'model.layers.0.mlp';
const every = (all: Alloc[], label: string) => all.filter((x) => x.label === label);
/** The event where backward starts: the first gradient the step allocates. */
/** Freed as the next event of the allocator (a free's trace has a request and a completion). */
const freedRightAfter = (a: Alloc, b: Alloc) => a.free > b.alloc && a.free <= b.alloc + 2;

describe('the router (MixtralTopKRouter)', () => {
  const all = allocations(small());
  const start = backwardStart(all);

  it('computes bf16 logits, an fp32 copy that dies once softmax made its fp32 result, which is kept', () => {
    const logits = first(all, `${L0}.gate`);
    expect(logits.size).toBe(N * E * 2);
    const copy = first(all, `${L0}.gate router_logits.float()`);
    expect(copy.size).toBe(N * E * 4);
    const probs = first(all, `${L0}.gate softmax`);
    expect(probs.size).toBe(N * E * 4);
    expect(freedRightAfter(copy, probs)).toBe(true);
    expect(probs.free).toBeGreaterThan(start); // SoftmaxBackward0 saves its result
    // the logits are the block's `_`, which dies when the block returns
    expect(logits.free).toBeLessThan(start);
  });

  it('keeps the top-k indices, and for the in-place division the sum and a clone of the values', () => {
    expect(first(all, `${L0}.gate topk values`).size).toBe(N * K * 4);
    const indices = first(all, `${L0}.gate topk indices`);
    expect(indices.size).toBe(N * K * 8);
    expect(indices.free).toBeGreaterThan(start);
    const sum = first(all, `${L0}.gate router_top_value.sum(-1)`);
    expect(sum.size).toBe(N * 4);
    expect(sum.free).toBeGreaterThan(start);
    const clone = first(all, `${L0}.gate router_top_value /= sum: original self (clone)`);
    expect(clone.size).toBe(N * K * 4);
    expect(clone.free).toBeGreaterThan(start);
  });
});

describe('the experts (grouped_mm_experts_forward)', () => {
  const all = allocations(small());
  const start = backwardStart(all);

  it('sorts the S = tokens x top_k expert ids: values and indices kept, a third buffer freed at once (S <= 4096: no CUB storage)', () => {
    expect(first(all, `${L0} torch.sort(expert_ids) sorted values`).size).toBe(S * 8);
    expect(first(all, `${L0} torch.sort(expert_ids) sort indices`).free).toBeGreaterThan(start); // saved by sample_weights[perm]
    const scratch = first(all, `${L0} torch.sort(expert_ids) sort scratch`);
    expect(freedRightAfter(scratch, scratch)).toBe(true);
    expect(every(all, `${L0} torch.sort(expert_ids) CUB radix sort`)).toHaveLength(0);
  });

  it('gathers [S, hidden] rows and keeps them for the first grouped GEMM; its floor-divided index is saved too', () => {
    const gathered = first(all, `${L0} hidden_states[perm // num_top_k]`);
    expect(gathered.size).toBe(S * H * 2);
    expect(gathered.free).toBeGreaterThan(start);
    expect(first(all, `${L0} perm // num_top_k`).free).toBeGreaterThan(start);
  });

  it('runs two grouped GEMMs over the whole 3-D weights: [S, 2I] and [S, hidden], with CUTLASS temporaries of 480 B and 512 B per SM in bf16', () => {
    const up = first(all, `${L0}.experts gate_up grouped_mm`);
    expect(up.size).toBe(S * 2 * I * 2);
    // the raw output dies as soon as its masked copy exists: only the copy is kept
    const upMasked = first(all, `${L0}.experts gate_up masked_fill`);
    expect(freedRightAfter(up, upMasked)).toBe(true);
    expect(upMasked.free).toBeGreaterThan(start);
    expect(first(all, `${L0}.experts down grouped_mm`).size).toBe(S * H * 2);
    const args = every(all, `${L0}.experts gate_up grouped_mm: grouped GEMM arguments`);
    expect(args.map((a) => a.size)).toEqual([480]);
    const workspace = first(all, `${L0}.experts gate_up grouped_mm: CUTLASS workspace`);
    expect(workspace.size).toBe(67584); // the H100's 132 SMs
    expect(freedRightAfter(workspace, workspace)).toBe(true);
  });

  it('weights the rows in fp32 (bf16 x fp32 routing weights), reorders and sums them: neither kept for backward', () => {
    const weighted = first(all, `${L0} proj_out * sample_weights_g`);
    expect(weighted.size).toBe(S * H * 4);
    const reordered = first(all, `${L0} weighted_out[inv_perm]`);
    expect(freedRightAfter(weighted, reordered)).toBe(true);
    expect(reordered.free).toBeLessThan(start);
    const summed = first(all, `${L0} .sum(dim=1)`);
    expect(summed.size).toBe(N * H * 4);
    expect(summed.free).toBeLessThan(start);
    expect(first(all, `${L0} final_hidden_states.to(hidden_states.dtype)`).size).toBe(N * H * 2);
  });

  it("computes each 3-D weight's gradient once, in one grouped GEMM: no per-expert zeros", () => {
    const gateUpGrad = every(all, `grad of ${L0}.experts gate_up grouped_mm weight`);
    expect(gateUpGrad.map((a) => a.size)).toEqual([E * 2 * I * H * 2]);
    const downGrad = every(all, `grad of ${L0}.experts down grouped_mm weight`);
    expect(downGrad.map((a) => a.size)).toEqual([E * H * I * 2]);
    // AccumulateGrad steals it: it lives on as the parameter's .grad until zero_grad, after the last gradient
    const lastGradient = all.filter((a) => a.label.startsWith('grad of')).at(-1)!;
    expect(gateUpGrad[0]!.free).toBeGreaterThan(lastGradient.alloc);
  });

  it("index_put_'s scratch in each gather's backward: 5 int64 buffers of the indices' count and a radix sort over the rows' bits", () => {
    const scratch = all.filter((a) => a.label.startsWith(`grad of ${L0} hidden_states[perm // num_top_k]: index_put_`));
    // up to 2,304 pairs CUB sorts in one tile and asks for 1 byte
    expect(S).toBeLessThanOrEqual(2304);
    expect(scratch.map((a) => a.size)).toEqual([S * 8, S * 8, S * 8, S * 8, S * 8, 1]);
    const tiled = allocations(small({ num_hidden_layers: 1 }), { batch_size: 20, seq_len: 128 }).filter((a) => a.label.startsWith(`grad of ${L0} hidden_states[perm // num_top_k]: index_put_ CUB`));
    expect(tiled.map((a) => a.size)).toEqual([radixSortTempBytes(20 * 128 * K, 12)]);
    expect(radixSortTempBytes(4096, 13)).toBe(71167); // measured on the H100 (mixtral_4l_bf16_adamw_s512)
    expect(first(all, `grad of ${L0} hidden_states[perm // num_top_k] (zeros, then index_put_)`).size).toBe(N * H * 2);
  });

  it('sorts more than 4,096 ids with CUB: its storage as measured for 20,480 (349,695 B)', () => {
    expect(radixSortTempBytes(20480)).toBe(349695);
    const big = allocations(small({ num_hidden_layers: 1 }), { batch_size: 20, seq_len: 128 });
    const cub = first(big, `${L0} torch.sort(expert_ids) CUB radix sort`);
    expect(cub.size).toBe(radixSortTempBytes(20 * 128 * K));
  });

  it('under autocast the experts run in fp32 (grouped_mm is not autocast): no CUTLASS temporaries, fp32 outputs', () => {
    const amp = allocations(small(), { precision: 'amp_bf16' });
    expect(first(amp, `${L0}.experts gate_up grouped_mm`).size).toBe(S * 2 * I * 4);
    expect(every(amp, `${L0}.experts gate_up grouped_mm: CUTLASS workspace`)).toHaveLength(0);
    // the router's linear is autocast: the weight cast, then the input cast, then bf16 logits
    expect(first(amp, `${L0}.gate`).size).toBe(N * E * 2);
    // fp32 hidden states: `.to(hidden_states.dtype)` is no copy
    expect(every(amp, `${L0} final_hidden_states.to(hidden_states.dtype)`)).toHaveLength(0);
  });

  it('simulates every mode: checkpointing (both kinds), eager attention, fp32, fp16 and AMP fp16', () => {
    for (const training of [
      { activation_checkpointing: 'non_reentrant', precision: 'amp_bf16' },
      { activation_checkpointing: 'reentrant', precision: 'bf16' },
      { attention: 'eager' },
      { precision: 'fp32' },
      { precision: 'fp16' },
      { precision: 'amp_fp16', optimizer: 'adamw' },
    ]) {
      const plan = planOf(small(), training);
      const r = simulate(plan, { device: planGpu(plan), untilSteady: false, timelinePoints: 0 });
      expect(r.oom, JSON.stringify(training)).toBeNull();
    }
  });
});

describe('Mixtral configs', () => {
  const bad = (hf: Record<string, unknown>) => () => resolveHfConfig({ ...small(), ...hf });
  it('reads the experts and Mistral-style attention, with MixtralConfig defaults', () => {
    const cfg = resolveHfConfig({ model_type: 'mixtral' });
    expect(cfg.family).toBe('llama');
    if (cfg.family !== 'llama') return;
    expect(cfg.moe).toEqual({ experts: 8, topK: 2, intermediate: 14336, kind: 'mixtral', normTopK: true, denseLayers: [] });
    expect([cfg.hidden, cfg.intermediate, cfg.layers, cfg.heads, cfg.kvHeads, cfg.vocabSize, cfg.slidingWindow]).toEqual([4096, 14336, 32, 32, 8, 32000, null]);
  });

  it('names the field it cannot use', () => {
    expect(bad({ output_router_logits: true })).toThrow(/model\.hf_config\.output_router_logits: the router load-balancing loss/);
    expect(bad({ router_jitter_noise: 0.01 })).toThrow(/model\.hf_config\.router_jitter_noise: router jitter noise \(0\.01\) is not simulated yet/);
    expect(bad({ router_jitter_noise: 'a' })).toThrow(/model\.hf_config\.router_jitter_noise: must be a number/);
    expect(bad({ num_experts_per_tok: 9 })).toThrow(/model\.hf_config\.num_experts_per_tok: must be at most num_local_experts \(8\), got 9/);
    expect(bad({ num_local_experts: 0 })).toThrow(/model\.hf_config\.num_local_experts: must be a positive integer/);
    expect(bad({ num_key_value_heads: 3 })).toThrow(/model\.hf_config\.num_key_value_heads: must divide num_attention_heads/);
    expect(bad({ architectures: ['MixtralForQuestionAnswering'] })).toThrow(/model\.hf_config\.architectures: "MixtralForQuestionAnswering" is not simulated yet/);
    expect(bad({ sliding_window: 'long' })).toThrow(/model\.hf_config\.sliding_window: must be a positive integer/);
    // a config.json may choose the experts implementation (PretrainedConfig pops `experts_implementation`)
    expect(bad({ experts_implementation: 'eager' })).toThrow(/model\.hf_config\.experts_implementation: "eager" is not simulated yet: memplan simulates transformers' default, "grouped_mm"/);
    expect(resolveHfConfig({ ...small(), experts_implementation: 'grouped_mm' }).layers).toBe(2);
  });

  it('LoRA adapts the attention only: the experts are no nn.Linear (transformers 5.17), so naming them is refused', () => {
    const plan = planOf(small(), { lora: { r: 8, alpha: 8, target_modules: ['q_proj', 'v_proj'] } });
    expect(simulate(plan, { device: planGpu(plan), untilSteady: false }).fits).toBe(true);
    const experts = planOf(small(), { lora: { r: 8, alpha: 8, target_modules: ['gate_up_proj'] } });
    expect(() => simulate(experts, { device: planGpu(experts), untilSteady: false })).toThrow(/training\.lora\.target_modules: no nn\.Linear of this model is named "gate_up_proj"/);
  });
});

describe('caveats', () => {
  it('says routing does not change memory (grouped_mm) and that the family is checked only on small runs', () => {
    const plan = parsePlan({ format: 'memplan.plan', version: 1, model: { preset: 'mixtral-8x7b' }, training: { batch_size: 1, seq_len: 128, precision: 'bf16', optimizer: 'sgd', steps: 1 }, gpu: { memory_limit_bytes: 2 ** 40 } });
    const r = simulate(plan, { device: planGpu(plan), untilSteady: false, timelinePoints: 0 });
    expect(r.caveats!.items).toContainEqual({ id: 'moe_routing', experts: 8, top_k: 2, experts_implementation: 'grouped_mm' });
    expect(r.caveats!.items).toContainEqual({ id: 'family_not_measured', family: 'mixtral' });
    expect(r.caveats!.confidence).toBe('medium');
    const text = caveatsText(r.caveats!).join('\n');
    expect(text).toMatch(/Mixture of experts \(8 experts, 2 per token\): transformers runs them with grouped_mm, whose memory does not depend on which experts the tokens go to/);
    expect(text).toMatch(/Mixtral is simulated from transformers' source/);
  });
});

describe('the largest batch of a real search on the H100 (PyTorch 2.11, transformers 5.17, fresh processes)', () => {
  // resources/measure/scenarios/boundary/mixtral_4l_bf16_adamw_seq512_cap10g.json, 6 steps a trial: 20 fits, 21 to
  // 24 run out in step 2 (peak allocated when they ran out, bytes)
  const real: Record<number, { fits: boolean; peakAllocated: number; peakReserved: number }> = {
    20: { fits: true, peakAllocated: 10228635648, peakReserved: 10674503680 },
    21: { fits: false, peakAllocated: 8866172928, peakReserved: 9802088448 },
    22: { fits: false, peakAllocated: 9240320000, peakReserved: 10213130240 },
    23: { fits: false, peakAllocated: 9626525696, peakReserved: 10643046400 },
    24: { fits: false, peakAllocated: 9995954176, peakReserved: 10141827072 },
  };
  it('finds 20, and every real trial fits or runs out as it did, at the same peak allocated', () => {
    const plan = parsePlan({
      format: 'memplan.plan',
      version: 1,
      model: { hf_config: { model_type: 'mixtral', architectures: ['MixtralForCausalLM'], hidden_size: 1024, intermediate_size: 3584, num_hidden_layers: 4, num_attention_heads: 8, num_key_value_heads: 2, num_local_experts: 8, num_experts_per_tok: 2, vocab_size: 32000, max_position_embeddings: 32768, rope_theta: 1e6, sliding_window: null, tie_word_embeddings: false } },
      training: { batch_size: 1, seq_len: 512, precision: 'bf16', optimizer: 'adamw' },
      gpu: { memory_limit_bytes: 10 * 2 ** 30 },
    });
    const r = findMaxBatch(plan, { device: planGpu(plan) });
    expect(r.max_batch).toBe(20);
    for (const [batch, want] of Object.entries(real)) {
      const trial = r.trials.find((t) => t.batch === Number(batch))!;
      expect(trial.fits, batch).toBe(want.fits);
      expect(trial.peak_allocated_bytes, batch).toBe(want.peakAllocated);
    }
    expect(r.trials.find((t) => t.batch === 20)!.peak_reserved_bytes).toBe(real[20]!.peakReserved);
  }, 60_000);
});

describe('how the model was loaded moves its segments, and with them the reserved peak (H100 recordings)', () => {
  // mixtral_4l_amp_bf16_ckpt built as memplan_measure.py builds it (from_config on the CPU, 3 steps) and loaded as
  // users load a checkpoint (from_pretrained of one a process of its own saved, 6 steps); each way gave the same
  // peaks in 3 fresh processes (test/fixtures/device/h100_materialization.json)
  const calibration = new URL('../../fixtures/calibration/', import.meta.url);
  const recording = (name: string) => ({
    meta: JSON.parse(readFileSync(new URL(`${name}.json`, calibration), 'utf8')) as { plan: unknown; peak_allocated_bytes: number; peak_reserved_bytes: number },
    snapshot: readSnapshotBytes(readFileSync(new URL(`${name}.pickle.gz`, calibration))),
  });
  const fromConfig = recording('mixtral_4l_amp_bf16_ckpt');
  const fromPretrained = recording('mixtral_4l_amp_bf16_ckpt_pretrained');

  it('the GPU is asked for the same allocations and frees either way, and memplan asks for them too', () => {
    const config = requestsOf(fromConfig.snapshot.trace);
    const pretrained = requestsOf(fromPretrained.snapshot.trace);
    expect(config.length).toBeGreaterThan(3000);
    expect(pretrained.slice(0, config.length)).toEqual(config);
    const plan = parsePlan(fromPretrained.meta.plan);
    const events: { action: string; addr: number; size: number }[] = [];
    simulate(plan, { device: planGpu(plan), untilSteady: false, onTrace: (action, addr, size) => events.push({ action, addr, size }) });
    expect(requestsOf(events).slice(0, pretrained.length)).toEqual(pretrained);
  }, 30_000);

  it("replayed with its own segments' addresses, each recording reserves what PyTorch did: 8.56 and 8.37 GiB", () => {
    for (const { meta, snapshot } of [fromConfig, fromPretrained]) {
      const report = replaySnapshot(snapshot, { allocConf: '' });
      expect(report.firstMismatch).toBeNull();
      expect(report.simPeakAllocatedBytes).toBe(meta.peak_allocated_bytes);
      expect(report.simPeakReservedBytes).toBe(meta.peak_reserved_bytes);
    }
    expect(fromConfig.meta.peak_allocated_bytes).toBe(fromPretrained.meta.peak_allocated_bytes);
    expect(fromConfig.meta.peak_reserved_bytes / fromPretrained.meta.peak_reserved_bytes).toBeCloseTo(1.0226, 4);
  }, 30_000);

  it('memplan reserves more than either: +2.9% and +5.2%', () => {
    const plan = parsePlan(fromPretrained.meta.plan);
    const r = simulate(plan, { device: planGpu(plan), untilSteady: false });
    expect(r.peak_allocated_bytes).toBe(fromPretrained.meta.peak_allocated_bytes);
    expect(r.peak_reserved_bytes / fromConfig.meta.peak_reserved_bytes).toBeCloseTo(1.0285, 3);
    expect(r.peak_reserved_bytes / fromPretrained.meta.peak_reserved_bytes).toBeCloseTo(1.0518, 3);
  }, 30_000);
});
