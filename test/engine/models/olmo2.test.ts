/**
 * OLMo 2 as transformers 5.17 trains it (engine/models/hf/config.ts resolveOlmo2, llama.ts LlamaConfig.normAfter):
 * Llama's model with a norm after attention and after the MLP (none before), q and k normed over their whole
 * projection, RMSNorm's weight applied in fp32 before the cast, and the rotary embedding kept in fp32 (q and k
 * rotated in fp32, then cast back). test/engine/train/calibration.test.ts compares the H100 recordings (olmo2_4l_*,
 * lora_olmo2_4l_*) event by event.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { resolveHfConfig } from '../../../engine/models/hf/config.ts';
import { parsePlan } from '../../../engine/plan/parse.ts';
import { simulate } from '../../../engine/train/simulate.ts';
import { planGpu } from '../../../cli/gpus.ts';
import { allocationsOf } from './allocations.ts';

const small = (extra: Record<string, unknown> = {}) => ({ model_type: 'olmo2', hidden_size: 256, intermediate_size: 512, num_hidden_layers: 2, num_attention_heads: 4, vocab_size: 4096, ...extra });
const planOf = (hf: Record<string, unknown>, training: Record<string, unknown> = {}) =>
  parsePlan({ format: 'memplan.plan', version: 1, model: { hf_config: hf }, training: { batch_size: 2, seq_len: 64, precision: 'bf16', optimizer: 'sgd', steps: 1, ...training } });

describe('OLMo 2 recorded on the H100', () => {
  it.each(['olmo2_4l_bf16_adamw_s1024', 'olmo2_4l_amp_bf16_ckpt_s1024', 'lora_olmo2_4l_fp32_qv_s512'])("%s: the recording's parameter count and both peaks to the byte", (name) => {
    const m = JSON.parse(readFileSync(new URL(`../../fixtures/calibration/${name}.json`, import.meta.url), 'utf8')) as { plan: unknown; model: { parameter_count: number }; peak_allocated_bytes: number; peak_reserved_bytes: number };
    const plan = parsePlan(m.plan);
    const r = simulate(plan, { device: planGpu(plan), untilSteady: false, timelinePoints: 0 });
    expect(r.model.parameter_count).toBe(m.model.parameter_count);
    expect([r.peak_allocated_bytes, r.peak_reserved_bytes]).toEqual([m.peak_allocated_bytes, m.peak_reserved_bytes]);
  });

  it('the presets: 1,484,916,736 and 7,298,617,344 parameters (the model cards: 1B and 7B)', () => {
    const count = (preset: string) => {
      const plan = parsePlan({ format: 'memplan.plan', version: 1, model: { preset }, training: { batch_size: 1, seq_len: 16, steps: 1 }, gpu: { memory_limit_bytes: 2 ** 40 } });
      return simulate(plan, { device: planGpu(plan), untilSteady: false, timelinePoints: 0, peakDetails: false }).model.parameter_count;
    };
    expect(count('olmo-2-1b')).toBe(1_484_916_736);
    expect(count('olmo-2-7b')).toBe(7_298_617_344);
  });
});

describe("OLMo 2's layer", () => {
  const all = allocationsOf(planOf(small()));
  const size = (label: string) => all.find((a) => a.label === label)?.size;

  it('has norms after attention and the MLP, none before; q and k norms span the projection', () => {
    expect(size('model.layers.0.input_layernorm.weight')).toBeUndefined();
    expect(size('model.layers.0.post_feedforward_layernorm.weight')).toBe(512); // [256] bf16
    // with 2 key/value heads of 4: q_norm [4 x 64], k_norm [2 x 64]
    const gqa = allocationsOf(planOf(small({ num_key_value_heads: 2 })));
    const gqaSize = (label: string) => gqa.find((a) => a.label === label)?.size;
    expect(gqaSize('model.layers.0.self_attn.q_norm.weight')).toBe(4 * 64 * 2);
    expect(gqaSize('model.layers.0.self_attn.k_norm.weight')).toBe(2 * 64 * 2);
  });

  it('keeps the rotary embedding in fp32: no cast of cos and sin, q and k rotated in fp32 and cast back', () => {
    expect(size('rotary cos')).toBeUndefined();
    // [2, 4, 64, 64] fp32 rotated, then its bf16 copy
    expect(size('model.layers.0.self_attn query with rotary embedding')).toBe(2 * 4 * 64 * 64 * 4);
    expect(size('model.layers.0.self_attn query .to(q_type)')).toBe(2 * 4 * 64 * 64 * 2);
  });

  it('applies the RMSNorm weight in fp32, then casts: the product is fp32 [B, T, H]', () => {
    expect(size('model.layers.0.post_attention_layernorm')).toBe(2 * 64 * 256 * 4);
    expect(resolveHfConfig(small())).toMatchObject({ normAfter: true, qkNorm: true, kvHeads: 4 });
  });
});
