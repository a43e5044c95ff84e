/**
 * Phi-3's partial rotary embedding and the longrope update (Phi-3 128k, Phi-3.5, Phi-4-mini): measured event for
 * event on the H100 (test/fixtures/calibration/phi4mini_4l_*, lora_phi4mini_4l_bf16_ckpt_s4200, in
 * test/engine/train/calibration.test.ts's exact list); here what the config says and what each forward allocates.
 */
import { describe, expect, it } from 'vitest';
import { InputError } from '../../../engine/errors.ts';
import { resolveHfConfig } from '../../../engine/models/hf/config.ts';
import { parsePlan } from '../../../engine/plan/parse.ts';
import { allocationsOf } from './allocations.ts';

const phi4mini = {
  model_type: 'phi3',
  architectures: ['Phi3ForCausalLM'],
  hidden_size: 3072,
  intermediate_size: 8192,
  num_hidden_layers: 2,
  num_attention_heads: 24,
  num_key_value_heads: 8,
  vocab_size: 200064,
  max_position_embeddings: 131072,
  original_max_position_embeddings: 4096,
  partial_rotary_factor: 0.75,
  rope_scaling: { type: 'longrope', long_factor: Array(48).fill(2), short_factor: Array(48).fill(1) },
  sliding_window: 262144,
  tie_word_embeddings: true,
};

/** The config's longrope pretraining length (undefined: a family without rotary embeddings). */
const originalMax = (raw: Record<string, unknown>) => {
  const cfg = resolveHfConfig(raw);
  return 'longropeOriginalMax' in cfg ? cfg.longropeOriginalMax : undefined;
};

const plan = (seqLen: number, config: Record<string, unknown> = phi4mini) =>
  parsePlan({ format: 'memplan.plan', version: 1, model: { hf_config: config }, training: { batch_size: 1, seq_len: seqLen, precision: 'bf16', steps: 2 }, gpu: { name: 'h100-sxm' } });

describe('the longrope update', () => {
  it('reads the pretraining length from rope_parameters, rope_scaling or the config, for longrope only', () => {
    expect(originalMax(phi4mini)).toBe(4096);
    expect(originalMax({ ...phi4mini, original_max_position_embeddings: 8192 })).toBe(8192);
    // Phi3Config always has the attribute (4096 unless given), and standardize_rope_params puts it in the rope dict
    const { original_max_position_embeddings: _, rope_scaling: __, ...rest } = phi4mini;
    expect(originalMax({ ...rest, rope_parameters: { rope_type: 'longrope', original_max_position_embeddings: 8192, partial_rotary_factor: 0.75 } })).toBe(4096);
    // another model type: the config's, else the rope dict's, else max_position_embeddings
    const llama = { ...rest, model_type: 'llama', architectures: ['LlamaForCausalLM'] };
    expect(originalMax({ ...llama, rope_scaling: { rope_type: 'longrope', original_max_position_embeddings: 8192 } })).toBe(8192);
    expect(originalMax({ ...llama, rope_scaling: { rope_type: 'longrope' } })).toBe(131072);
    expect(originalMax({ ...phi4mini, rope_scaling: null })).toBeNull();
    // Phi3Config renames the older Phi-3 configs' "su" and "yarn" to "longrope"; for other families yarn is yarn
    expect(originalMax({ ...phi4mini, rope_scaling: { ...phi4mini.rope_scaling, type: 'su' } })).toBe(4096);
    expect(originalMax({ ...phi4mini, rope_scaling: { ...phi4mini.rope_scaling, type: 'yarn' } })).toBe(4096);
    expect(originalMax({ ...phi4mini, model_type: 'qwen3', architectures: ['Qwen3ForCausalLM'], rope_scaling: { rope_type: 'yarn', factor: 4, original_max_position_embeddings: 32768 } })).toBeNull();
    expect(originalMax({ ...phi4mini, model_type: 'llama', architectures: ['LlamaForCausalLM'], rope_scaling: { rope_type: 'llama3', factor: 8, original_max_position_embeddings: 8192 } })).toBeNull();
    let error: unknown;
    try {
      resolveHfConfig({ ...phi4mini, original_max_position_embeddings: '4k' });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(InputError);
    expect((error as InputError).where).toBe('model.hf_config.original_max_position_embeddings');
  });

  it('turns 96 of each head\'s 128 dimensions: cos and sin [1, T, 96] in fp32', () => {
    const all = allocationsOf(plan(512));
    const cos = all.filter((a) => a.label === 'rotary: emb.cos()');
    expect(cos.length).toBe(2); // one per step
    for (const a of cos) expect(a.size).toBe(1 * 512 * 96 * 4);
  });

  it('below the pretraining length swaps in the short factors\' buffer once; past it computes the long factors in every forward', () => {
    const short = allocationsOf(plan(1024));
    expect(short.filter((a) => a.label === 'rotary: seq_len > original_max_position_embeddings').length).toBe(2);
    expect(short.some((a) => a.label.startsWith('model.rotary_emb.inv_freq (long factors)'))).toBe(false);
    // the model's own inv_freq buffer is freed in the first forward (replaced by original_inv_freq), never again
    const buffer = short.find((a) => a.label === 'model.rotary_emb.inv_freq')!;
    expect(buffer.free).toBeLessThan(short.find((a) => a.label === 'rotary: emb.cos()')!.alloc);

    const long = allocationsOf(plan(4100));
    const computed = long.filter((a) => a.label === 'model.rotary_emb.inv_freq (long factors)');
    expect(computed.length).toBe(2);
    expect(computed[0]!.size).toBe(48 * 4);
    // each forward's long factors replace the last ones: the first step's die in the second step's update
    expect(computed[0]!.free).toBeGreaterThan(computed[1]!.alloc);
    expect(computed[1]!.free).toBe(Infinity);
    const factors = long.filter((a) => a.label === 'rotary: torch.tensor(long_factor)');
    expect(factors.length).toBe(2);
  });
});
