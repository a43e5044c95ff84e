/** A Gemma config.json pasted into a plan, simulated by the memplan command as a user runs it. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { caveatsSchema } from '../../engine/index.ts';
import { memplan } from './support.ts';

const scratch = mkdtempSync(join(tmpdir(), 'memplan-gemma-'));

/** google/gemma-2-2b's config.json as the Hub ships it. */
const gemma2 = {
  architectures: ['Gemma2ForCausalLM'],
  attention_bias: false,
  attention_dropout: 0.0,
  attn_logit_softcapping: 50.0,
  bos_token_id: 2,
  cache_implementation: 'hybrid',
  eos_token_id: 1,
  final_logit_softcapping: 30.0,
  head_dim: 256,
  hidden_act: 'gelu_pytorch_tanh',
  hidden_activation: 'gelu_pytorch_tanh',
  hidden_size: 2304,
  initializer_range: 0.02,
  intermediate_size: 9216,
  max_position_embeddings: 8192,
  model_type: 'gemma2',
  num_attention_heads: 8,
  num_hidden_layers: 26,
  num_key_value_heads: 4,
  pad_token_id: 0,
  query_pre_attn_scalar: 256,
  rms_norm_eps: 1e-6,
  rope_theta: 10000.0,
  sliding_window: 4096,
  torch_dtype: 'float32',
  transformers_version: '4.42.4',
  use_cache: true,
  vocab_size: 256000,
};

function plan(name: string, hf: Record<string, unknown>): string {
  const file = join(scratch, `${name}.plan.json`);
  writeFileSync(file, JSON.stringify({ format: 'memplan.plan', version: 1, model: { hf_config: hf }, training: { batch_size: 2, seq_len: 1024, precision: 'bf16', optimizer: 'adamw' }, gpu: { name: 'h100-sxm' } }));
  return file;
}

describe('memplan simulate with a Gemma config.json', () => {
  it('simulates Gemma 2 2B from its config.json; measured at that size, it carries no family caveat', () => {
    const file = plan('gemma2', gemma2);
    const r = memplan(['simulate', file, '--json']);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out.model.parameter_count).toBe(2_614_341_888);
    expect(out.oom).toBeNull();
    const caveats = caveatsSchema.parse(out.caveats);
    expect(caveats.items.some((c) => c.id === 'family_not_measured')).toBe(false);
    const text = memplan(['simulate', file]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).not.toMatch(/Gemma 2 is simulated from transformers' source/);
  });

  it('refuses the multimodal gemma3 config and points to its text_config', () => {
    const r = memplan(['simulate', plan('gemma3', { model_type: 'gemma3', architectures: ['Gemma3ForConditionalGeneration'], text_config: { hidden_size: 2560 } })]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/model\.hf_config\.model_type: "gemma3" is Gemma3ForConditionalGeneration/);
    expect(r.stderr).toContain('"model_type": "gemma3_text"');
  });
});
