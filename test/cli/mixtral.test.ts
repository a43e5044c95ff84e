/** A Mixtral config.json pasted into a plan, simulated by the memplan command as a user runs it. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { caveatsSchema } from '../../engine/index.ts';
import { memplan } from './support.ts';

const scratch = mkdtempSync(join(tmpdir(), 'memplan-mixtral-'));

/** mistralai/Mixtral-8x7B-v0.1's config.json as the Hub ships it. */
const mixtral8x7b = {
  architectures: ['MixtralForCausalLM'],
  attention_dropout: 0.0,
  bos_token_id: 1,
  eos_token_id: 2,
  hidden_act: 'silu',
  hidden_size: 4096,
  initializer_range: 0.02,
  intermediate_size: 14336,
  max_position_embeddings: 32768,
  model_type: 'mixtral',
  num_attention_heads: 32,
  num_experts_per_tok: 2,
  num_hidden_layers: 32,
  num_key_value_heads: 8,
  num_local_experts: 8,
  output_router_logits: false,
  rms_norm_eps: 1e-5,
  rope_theta: 1e6,
  router_aux_loss_coef: 0.02,
  sliding_window: null,
  tie_word_embeddings: false,
  torch_dtype: 'bfloat16',
  transformers_version: '4.36.0.dev0',
  use_cache: true,
  vocab_size: 32000,
};

describe('memplan simulate with a Mixtral config.json', () => {
  it('simulates Mixtral 8x7B from its config.json, says routing does not change its memory, at medium confidence', () => {
    const file = join(scratch, 'mixtral.plan.json');
    writeFileSync(file, JSON.stringify({ format: 'memplan.plan', version: 1, model: { hf_config: mixtral8x7b }, training: { batch_size: 1, seq_len: 512, precision: 'bf16', optimizer: 'sgd' }, gpu: { memory_limit_bytes: 2 ** 38 } }));
    const r = memplan(['simulate', file, '--json']);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out.model.parameter_count).toBe(46_702_792_704);
    expect(out.oom).toBeNull();
    const caveats = caveatsSchema.parse(out.caveats);
    expect(caveats.items).toContainEqual({ id: 'moe_routing', experts: 8, top_k: 2, experts_implementation: 'grouped_mm' });
    expect(caveats.confidence).toBe('medium');
    const text = memplan(['simulate', file]);
    expect(text.stdout).toMatch(/Mixture of experts \(8 experts, 2 per token\): transformers runs them with grouped_mm/);
    expect(text.stdout).toMatch(/balanced routing and the worst case \(every token to the same 2 experts\) need the same memory/);
  });

  it('names the field of a setting it does not simulate', () => {
    const file = join(scratch, 'aux.plan.json');
    writeFileSync(file, JSON.stringify({ format: 'memplan.plan', version: 1, model: { hf_config: { ...mixtral8x7b, output_router_logits: true } }, training: { batch_size: 1, seq_len: 512 } }));
    const r = memplan(['simulate', file]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/model\.hf_config\.output_router_logits/);
  });
});
