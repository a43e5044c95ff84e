/**
 * Comparing plans: the settings rows (defaults applied, so an omitted setting equals its default written out) and
 * the attribution of a difference to single setting changes, each checked against its own simulation of a plan
 * written by hand, not built by the code under test.
 */
import { describe, expect, it } from 'vitest';
import catalogJson from '../../../resources/gpus.json' with { type: 'json' };
import {
  attribute,
  attributeDifference,
  attributionVariants,
  differingSettings,
  parseGpuCatalog,
  parsePlan,
  planGpu,
  planSettings,
  SETTING_KEYS,
  simulate,
  withSettingOf,
  type Plan,
  type PlanInput,
} from '../../../engine/index.ts';

const catalog = parseGpuCatalog(catalogJson);
const device = (plan: Plan) => planGpu(plan, catalog);

const layers = [
  { type: 'linear', in_features: 1024, out_features: 4096 },
  { type: 'repeat', count: 4, layers: [{ type: 'residual', layers: [{ type: 'layer_norm', normalized_shape: 4096 }, { type: 'linear', in_features: 4096, out_features: 4096 }, { type: 'gelu' }] }] },
  { type: 'linear', in_features: 4096, out_features: 1000 },
];

function plan(training: Record<string, unknown>, extra: Record<string, unknown> = {}): Plan {
  return parsePlan({ format: 'memplan.plan', version: 1, model: { input_features: 1024, layers }, training: { batch_size: 4096, ...training }, ...extra } as PlanInput, { catalog });
}

function peaks(p: Plan) {
  const r = simulate(p, { device: device(p), timelinePoints: 0, peakDetails: false });
  return { peak_allocated_bytes: r.peak_allocated_bytes, peak_reserved_bytes: r.peak_reserved_bytes, fits: r.oom === null };
}

describe('settings', () => {
  it('lists every setting with defaults applied: an omitted precision equals fp32 written out, no GPU equals the default GPU', () => {
    const implicit = plan({});
    const explicit = plan({ precision: 'fp32', optimizer: 'adamw', activation_checkpointing: false }, { gpu: { name: 'h100-sxm' } });
    expect(planSettings(implicit).map((s) => s.key)).toEqual([...SETTING_KEYS]);
    expect(differingSettings(implicit, explicit)).toEqual([]);
    expect(planSettings(implicit).find((s) => s.key === 'gpu')!.value).toEqual({ id: 'h100-sxm' });
    expect(planSettings(implicit).find((s) => s.key === 'model')!.value).toEqual({ source: 'layers', name: '', layer_count: 3 });
  });

  it('finds exactly the settings that differ, the model as one row', () => {
    const a = plan({});
    const b = plan({ precision: 'amp_bf16', activation_checkpointing: true }, { gpu: { memory_limit_bytes: 8 * 1024 ** 3 } });
    expect(differingSettings(a, b)).toEqual(['training.precision', 'training.activation_checkpointing', 'gpu']);
    const gpt2 = parsePlan({ format: 'memplan.plan', version: 1, model: { preset: 'gpt2' }, training: { batch_size: 4096 } }, { catalog });
    expect(differingSettings(a, gpt2)).toEqual(['model']);
    expect(planSettings(gpt2).find((s) => s.key === 'model')!.value).toEqual({ source: 'preset', name: 'gpt2', layer_count: 0 });
  });

  it('takes one setting from the other plan and leaves the rest of the base as it was', () => {
    const a = plan({});
    const b = plan({ precision: 'amp_bf16', batch_size: 512 }, { gpu: { name: 'a100-80gb' } });
    const v = withSettingOf(a, b, 'training.precision');
    expect(differingSettings(a, v)).toEqual(['training.precision']);
    expect(differingSettings(v, b)).toEqual(['training.batch_size', 'gpu']);
    expect(differingSettings(withSettingOf(b, a, 'gpu'), b)).toEqual(['gpu']);
    expect(withSettingOf(b, a, 'gpu').gpu).toBeUndefined();
    expect(a.training.precision).toBe('fp32');
  });
});

describe('attribution', () => {
  it('splits a difference over each single change, each change measured by its own simulation', () => {
    const a = plan({});
    const b = plan({ precision: 'amp_bf16', activation_checkpointing: 'non_reentrant', batch_size: 2048 });
    const result = attribute(a, b, { device });
    const base = peaks(a);
    const other = peaks(b);
    // The single changes, written by hand.
    const expected = {
      'training.precision': peaks(plan({ precision: 'amp_bf16' })),
      'training.activation_checkpointing': peaks(plan({ activation_checkpointing: 'non_reentrant' })),
      'training.batch_size': peaks(plan({ batch_size: 2048 })),
    };
    expect(result.reserved_difference_bytes).toBe(other.peak_reserved_bytes - base.peak_reserved_bytes);
    expect(result.reserved_difference_bytes).toBeLessThan(0);
    expect(result.changes.map((c) => c.key).sort()).toEqual(Object.keys(expected).sort());
    for (const change of result.changes) {
      if (!('reserved_delta_bytes' in change)) throw new Error(`${change.key} not simulated: ${change.message}`);
      const alone = expected[change.key as keyof typeof expected];
      expect(change.reserved_delta_bytes).toBe(alone.peak_reserved_bytes - base.peak_reserved_bytes);
      expect(change.allocated_delta_bytes).toBe(alone.peak_allocated_bytes - base.peak_allocated_bytes);
      expect(change.reserved_delta_bytes).toBeLessThan(0); // each of these saves memory on its own
    }
    const deltas = result.changes.map((c) => ('reserved_delta_bytes' in c ? Math.abs(c.reserved_delta_bytes) : 0));
    expect(deltas).toEqual([...deltas].sort((x, y) => y - x)); // largest first
    const explained = result.changes.reduce((s, c) => s + ('reserved_delta_bytes' in c ? c.reserved_delta_bytes : 0), 0);
    expect(result.interaction_bytes).toBe(result.reserved_difference_bytes - explained);
    expect(result.interaction_bytes).not.toBe(0); // savings overlap: half the batch *and* checkpointing save less than both alone
    const precision = result.changes.find((c) => c.key === 'training.precision')!;
    expect([precision.from, precision.to]).toEqual(['fp32', 'amp_bf16']);
  });

  it('a single difference is the whole difference, with nothing more to simulate', () => {
    const a = plan({});
    const b = plan({ activation_checkpointing: 'non_reentrant' });
    expect(attributionVariants(a, b)).toEqual([]);
    const result = attribute(a, b, { device });
    expect(result.changes).toHaveLength(1);
    expect(result.changes[0]).toMatchObject({ key: 'training.activation_checkpointing', from: false, to: 'non_reentrant', reserved_delta_bytes: result.reserved_difference_bytes });
    expect(result.interaction_bytes).toBe(0);
    expect(attribute(a, plan({}), { device })).toMatchObject({ changes: [], reserved_difference_bytes: 0, interaction_bytes: 0 });
  });

  it('a change the engine refuses alone is reported as not simulated, with the engine’s reason', () => {
    const a = plan({ seq_len: 2048 }); // a layer list ignores the sequence length
    const b = parsePlan({ format: 'memplan.plan', version: 1, model: { preset: 'gpt2' }, training: { batch_size: 2, seq_len: 1024 } }, { catalog });
    const result = attribute(a, b, { device });
    const model = result.changes.find((c) => c.key === 'model')!;
    expect(model).toMatchObject({ reason_id: 'not_simulated' });
    expect('message' in model && model.message).toMatch(/seq_len: 2048 is more than the model's 1024 positions/);
    expect(result.changes[result.changes.length - 1]!.key).toBe('model'); // not-simulated changes last
  });

  it('a change whose step PyTorch itself fails alone is reported as such, not as unsimulated', () => {
    // A BERT regression head (one label) in AMP bf16, against a language model trained in bf16: the precision change
    // alone puts MSELoss's backward on bf16 scores and fp32 labels, which PyTorch refuses (engine/models/hf/config.ts).
    const bert = { model_type: 'bert', architectures: ['BertForSequenceClassification'], num_labels: 1, hidden_size: 128, intermediate_size: 512, num_hidden_layers: 2, num_attention_heads: 2, vocab_size: 2048, max_position_embeddings: 128 };
    const llama = { model_type: 'llama', hidden_size: 128, intermediate_size: 344, num_hidden_layers: 2, num_attention_heads: 2, num_key_value_heads: 2, vocab_size: 2048, max_position_embeddings: 128 };
    const hfPlan = (config: object, precision: string) => parsePlan({ format: 'memplan.plan', version: 1, model: { hf_config: config }, training: { batch_size: 4, seq_len: 64, precision } }, { catalog });
    const a = hfPlan(bert, 'amp_bf16');
    const result = attribute(a, hfPlan(llama, 'bf16'), { device });
    const precision = result.changes.find((c) => c.key === 'training.precision')!;
    expect(precision).toMatchObject({ reason_id: 'fails_in_pytorch' });
    expect('message' in precision && precision.message).toMatch(/Found dtype Float but expected BFloat16/);
    expect(result.changes.find((c) => c.key === 'model')).toMatchObject({ reserved_delta_bytes: expect.any(Number) });
    // in fp16 the same change fails with Half; a plain refusal stays not_simulated (the test above)
    const fp16 = attribute(hfPlan(bert, 'amp_fp16'), hfPlan(llama, 'fp16'), { device });
    expect(fp16.changes.find((c) => c.key === 'training.precision')).toMatchObject({ reason_id: 'fails_in_pytorch', message: expect.stringMatching(/expected Half/) });
    // the same variant without its error outcome (a host that measured nothing) is still not simulated
    const folded = attributeDifference(a, hfPlan(llama, 'bf16'), { base: peaks(a), other: peaks(hfPlan(llama, 'bf16')), outcomes: new Map() });
    expect(folded.changes.find((c) => c.key === 'training.precision')).toMatchObject({ reason_id: 'not_simulated', message: '' });
  });

  it('folds outcomes measured elsewhere (the renderer measures in the worker); a missing outcome is not simulated', () => {
    const a = plan({});
    const b = plan({ precision: 'amp_bf16', batch_size: 2048 });
    const variants = attributionVariants(a, b);
    expect(variants.map((v) => v.key)).toEqual(['training.batch_size', 'training.precision']);
    const outcomes = new Map(variants.slice(0, 1).map((v) => [v.key, peaks(v.plan)] as const));
    const result = attributeDifference(a, b, { base: peaks(a), other: peaks(b), outcomes });
    expect(result.changes.find((c) => c.key === 'training.precision')).toMatchObject({ reason_id: 'not_simulated' });
    expect(result.changes.find((c) => c.key === 'training.batch_size')).toMatchObject({ reserved_delta_bytes: peaks(plan({ batch_size: 2048 })).peak_reserved_bytes - peaks(a).peak_reserved_bytes });
  });
});

describe('what is trained: LoRA and frozen parameters', () => {
  // A small Llama, so a full fine-tune and LoRA of it simulate in well under a second.
  const llama = { model_type: 'llama', hidden_size: 256, intermediate_size: 688, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 4, vocab_size: 4096, max_position_embeddings: 512 };
  const tuned = (training: Record<string, unknown>): Plan =>
    parsePlan({ format: 'memplan.plan', version: 1, model: { hf_config: llama }, training: { batch_size: 4, seq_len: 256, precision: 'amp_bf16', ...training } } as PlanInput, { catalog });
  const lora = { r: 16, alpha: 32, dropout: 0.05, target_modules: ['q_proj', 'v_proj'] };
  const value = (p: Plan, key: 'training.lora' | 'training.freeze') => planSettings(p).find((s) => s.key === key)!.value;

  it('a LoRA plan and a full fine-tune of the same model differ in the LoRA row alone', () => {
    const full = tuned({});
    const adapters = tuned({ lora });
    expect(differingSettings(full, adapters)).toEqual(['training.lora']);
    expect(value(full, 'training.lora')).toBe(false);
    expect(value(adapters, 'training.lora')).toEqual({ ...lora, modules_to_save: [], ensure_weight_tying: false, use_dora: false, quantization: 'none' });
    // PEFT's target_modules are a set: the order they are written in changes nothing
    expect(differingSettings(adapters, tuned({ lora: { ...lora, target_modules: ['v_proj', 'q_proj'] } }))).toEqual([]);
    expect(differingSettings(adapters, tuned({ lora: { ...lora, quantization: '4bit' } }))).toEqual(['training.lora']);
    expect(differingSettings(adapters, tuned({ lora: { ...lora, r: 8 } }))).toEqual(['training.lora']);
    // modules_to_save too: a set of names
    const saved = tuned({ lora: { ...lora, modules_to_save: ['embed_tokens', 'lm_head'] } });
    expect(differingSettings(adapters, saved)).toEqual(['training.lora']);
    expect(differingSettings(saved, tuned({ lora: { ...lora, modules_to_save: ['lm_head', 'embed_tokens'] } }))).toEqual([]);
  });

  it('frozen parameters are a row of their own, their patterns a set', () => {
    const frozen = tuned({ freeze: ['model.embed_tokens.*', 'model.layers.0.*'] });
    expect(differingSettings(tuned({}), frozen)).toEqual(['training.freeze']);
    expect(value(frozen, 'training.freeze')).toEqual(['model.embed_tokens.*', 'model.layers.0.*']);
    expect(differingSettings(frozen, tuned({ freeze: ['model.layers.0.*', 'model.embed_tokens.*'] }))).toEqual([]);
  });

  it('takes LoRA from the other plan, or takes it away', () => {
    const full = tuned({ batch_size: 8 });
    const adapters = tuned({ lora });
    expect(withSettingOf(full, adapters, 'training.lora').training.lora).toEqual({ ...lora, modules_to_save: [], ensure_weight_tying: false, use_dora: false, quantization: 'none' });
    const without = withSettingOf(adapters, full, 'training.lora');
    expect('lora' in without.training).toBe(false);
    expect(differingSettings(without, tuned({}))).toEqual([]);
  });

  it('names LoRA as what explains the difference, measured by its own simulation', () => {
    const full = tuned({});
    const adapters = tuned({ lora, batch_size: 8 });
    const result = attribute(full, adapters, { device });
    const change = result.changes.find((c) => c.key === 'training.lora')!;
    if (!('reserved_delta_bytes' in change)) throw new Error(`LoRA not simulated: ${change.message}`);
    const alone = peaks(tuned({ lora })); // written by hand: the full fine-tune with LoRA and nothing else
    expect(change.reserved_delta_bytes).toBe(alone.peak_reserved_bytes - peaks(full).peak_reserved_bytes);
    expect(change.reserved_delta_bytes).toBeLessThan(0); // no gradients or AdamW state for the frozen base
    expect([change.from, change.to]).toEqual([false, { ...lora, modules_to_save: [], ensure_weight_tying: false, use_dora: false, quantization: 'none' }]);
    expect(result.changes.map((c) => c.key).sort()).toEqual(['training.batch_size', 'training.lora']);
  });
});
