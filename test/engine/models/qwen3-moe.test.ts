/**
 * Qwen3-MoE as transformers 5.17 trains it (engine/models/hf/config.ts resolveQwen3Moe, llama.ts, mixtral-moe.ts):
 * Qwen3's attention with Mixtral's model and experts, its own router, the parameters in the order its modules
 * register them, the dense layers of `mlp_only_layers`, the configs it refuses, the published presets and the
 * caveats. test/engine/train/calibration.test.ts compares the H100 recordings (qwen3moe_4l_*, lora_qwen3moe_4l_*)
 * event by event, and the boundary suite holds three real searches.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { resolveHfConfig } from '../../../engine/models/hf/config.ts';
import { parsePlan } from '../../../engine/plan/parse.ts';
import { simulate } from '../../../engine/train/simulate.ts';
import { planGpu } from '../../../cli/gpus.ts';
import { caveatsText } from '../../../cli/caveats.ts';
import { allocationsOf } from './allocations.ts';

const B = 2;
const T = 64;
const E = 8;
const K = 2;
const small = (extra: Record<string, unknown> = {}) => ({
  model_type: 'qwen3_moe',
  hidden_size: 256,
  intermediate_size: 1024,
  moe_intermediate_size: 128,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 64,
  vocab_size: 4096,
  num_experts: E,
  num_experts_per_tok: K,
  ...extra,
});

function planOf(hf: Record<string, unknown>, training: Record<string, unknown> = {}) {
  return parsePlan({ format: 'memplan.plan', version: 1, model: { hf_config: hf }, training: { batch_size: B, seq_len: T, precision: 'bf16', optimizer: 'sgd', steps: 1, ...training } });
}

describe('Qwen3-MoE recorded on the H100', () => {
  const recordings = [
    'qwen3moe_4l_bf16_adamw_s512',
    'qwen3moe_4l_fp16_adamw_s512',
    'qwen3moe_4l_amp_bf16_ckpt_s1024',
    'qwen3moe_4l_amp_fp16_adamw_s512',
    'qwen3moe_4l_bf16_sgdm_nonorm_s1024',
    'qwen3moe_4l_fp32_sgd_dense13_s512',
    'lora_qwen3moe_4l_bf16_qv_ckpt_s512',
  ];
  for (const name of recordings) {
    it(`${name}: the recording's parameter count and both peaks to the byte`, () => {
      const m = JSON.parse(readFileSync(new URL(`../../fixtures/calibration/${name}.json`, import.meta.url), 'utf8')) as {
        plan: unknown;
        model: { parameter_count: number; parameter_tensors: number };
        peak_allocated_bytes: number;
        peak_reserved_bytes: number;
      };
      const plan = parsePlan(m.plan);
      const r = simulate(plan, { device: planGpu(plan), untilSteady: false, timelinePoints: 0 });
      expect(r.model.parameter_count).toBe(m.model.parameter_count);
      expect([r.peak_allocated_bytes, r.peak_reserved_bytes]).toEqual([m.peak_allocated_bytes, m.peak_reserved_bytes]);
    });
  }
});

describe('the sparse block (Qwen3MoeSparseMoeBlock)', () => {
  it('registers the experts before the router: their weights reach the GPU first (Mixtral: the router first)', () => {
    const loaded = (hf: Record<string, unknown>) => allocationsOf(planOf(hf)).map((a) => a.label).filter((l) => l.startsWith('model.layers.0.mlp.'));
    expect(loaded(small()).slice(0, 3)).toEqual(['model.layers.0.mlp.experts.gate_up_proj', 'model.layers.0.mlp.experts.down_proj', 'model.layers.0.mlp.gate.weight']);
    const mixtral = { ...small(), model_type: 'mixtral', num_local_experts: E, intermediate_size: 128 };
    expect(loaded(mixtral).slice(0, 3)).toEqual(['model.layers.0.mlp.gate.weight', 'model.layers.0.mlp.experts.gate_up_proj', 'model.layers.0.mlp.experts.down_proj']);
  });
});

describe('the router (Qwen3MoeTopKRouter)', () => {
  const labels = (hf: Record<string, unknown>, training: Record<string, unknown> = {}) => allocationsOf(planOf(hf, training)).map((a) => a.label);
  const L0 = 'model.layers.0.mlp.gate';

  it('softmax(dtype=torch.float): bf16 logits are converted (one copy), fp16 ones take half_to_float (none)', () => {
    const bf16 = allocationsOf(planOf(small()));
    expect(bf16.filter((a) => a.label === `${L0} softmax input.toType(float32)`)).toHaveLength(1);
    const fp16 = labels(small(), { precision: 'fp16' });
    expect(fp16).not.toContain(`${L0} softmax input.toType(float32)`);
    expect(fp16).toContain(`${L0} softmax`);
  });

  it('renormalizes the top-k weights only with norm_topk_prob, and casts them back to the logits\' dtype', () => {
    expect(labels(small({ norm_topk_prob: true }))).toContain(`${L0} router_top_value.sum(-1)`);
    const plain = labels(small({ norm_topk_prob: false }));
    expect(plain).not.toContain(`${L0} router_top_value.sum(-1)`);
    expect(plain).toContain(`${L0} router_top_value.to(router_logits.dtype)`);
    // in fp32 the cast is the tensor itself
    expect(labels(small(), { precision: 'fp32' })).not.toContain(`${L0} router_top_value.to(router_logits.dtype)`);
  });

  it('weights the experts\' output in the weights\' dtype: bf16 [S, hidden] where Mixtral promotes to fp32', () => {
    const weighted = allocationsOf(planOf(small())).find((a) => a.label === 'model.layers.0.mlp proj_out * sample_weights_g')!;
    expect(weighted.size).toBe(Math.ceil((B * T * K * 256 * 2) / 512) * 512);
  });
});

describe('the config', () => {
  it('the presets: Qwen3-30B-A3B has 30,532,122,624 parameters (the model card: 30.5B), Qwen3-235B-A22B 235B', () => {
    const count = (preset: string) => {
      const plan = parsePlan({ format: 'memplan.plan', version: 1, model: { preset }, training: { batch_size: 1, seq_len: 16, steps: 1 }, gpu: { memory_limit_bytes: 2 ** 42 } });
      return simulate(plan, { device: planGpu(plan), untilSteady: false, timelinePoints: 0, peakDetails: false }).model.parameter_count;
    };
    expect(count('qwen3-30b-a3b')).toBe(30_532_122_624);
    expect(count('qwen3-235b-a22b') / 1e9).toBeCloseTo(235.1, 1);
  });

  it('defaults as Qwen3MoeConfig: norm_topk_prob false, 128 experts, 8 a token; head_dim hidden_size // heads unless given', () => {
    const cfg = resolveHfConfig({ model_type: 'qwen3_moe' });
    expect(cfg.family === 'llama' && [cfg.moe, cfg.headDim, cfg.qkNorm, cfg.slidingWindow]).toEqual([{ experts: 128, topK: 8, intermediate: 768, kind: 'qwen3_moe', normTopK: false, denseLayers: [] }, 2048 / 32, true, null]);
  });

  it('mlp_only_layers and decoder_sparse_step make dense layers of intermediate_size', () => {
    const cfg = resolveHfConfig(small({ num_hidden_layers: 6, mlp_only_layers: [0], decoder_sparse_step: 2 }));
    expect(cfg.family === 'llama' && cfg.moe?.denseLayers).toEqual([0, 2, 4]);
    const all = allocationsOf(planOf(small({ mlp_only_layers: [1] })));
    const size = (label: string) => all.find((a) => a.label === label)?.size;
    // Qwen3MoeMLP(intermediate_size): [1024, 256] bf16; the sparse layer's experts are moe_intermediate_size wide
    expect(size('model.layers.1.mlp.gate_proj.weight')).toBe(1024 * 256 * 2);
    expect(size('model.layers.1.mlp.experts.gate_up_proj')).toBeUndefined();
    expect(size('model.layers.0.mlp.experts.gate_up_proj')).toBe(E * 2 * 128 * 256 * 2);
    // no sparse layer at all: no mixture of experts (and no routing caveat)
    const none = resolveHfConfig(small({ decoder_sparse_step: 3 }));
    expect(none.family === 'llama' && none.moe).toBeNull();
  });

  it('refuses what it does not simulate, at its field', () => {
    expect(() => resolveHfConfig(small({ output_router_logits: true }))).toThrow(/^model\.hf_config\.output_router_logits: the router load-balancing loss .* memplan trains Qwen3MoeForCausalLM with its default false/);
    expect(() => resolveHfConfig(small({ experts_implementation: 'eager' }))).toThrow(/^model\.hf_config\.experts_implementation: "eager" is not simulated yet/);
    expect(() => resolveHfConfig(small({ num_experts_per_tok: 9 }))).toThrow(/^model\.hf_config\.num_experts_per_tok: must be at most num_experts \(8\), got 9$/);
    expect(() => resolveHfConfig(small({ mlp_only_layers: 'all' }))).toThrow(/^model\.hf_config\.mlp_only_layers: must be a list of layer indices/);
    expect(() => resolveHfConfig(small({ architectures: ['Qwen3ForCausalLM'] }))).toThrow(/^model\.hf_config\.architectures: "Qwen3ForCausalLM" is not simulated yet; memplan trains Qwen3MoeForCausalLM/);
  });

  it('says what it assumes: routing-independent grouped_mm memory, and the family measured on small models only', () => {
    const text = caveatsText(simulate(planOf(small()), { device: planGpu(planOf(small())), untilSteady: false, timelinePoints: 0 }).caveats!).join('\n');
    expect(text).toMatch(/Mixture of experts \(8 experts, 2 per token\)/);
    expect(text).toMatch(/Qwen3-MoE is simulated from transformers' source/);
  });
});
