/**
 * Gemma 2 and Gemma 3 (text) as transformers 5.x runs them (engine/models/hf/gemma.ts), op by op: what the
 * soft-capping keeps for backward and how large it is, Gemma RMSNorm's fp32 copies, which layers get the
 * sliding-window mask past the window, the scaled embedding, and the configs it reads or refuses. Implemented from
 * the source; test/engine/train/calibration.test.ts checks the peaks of 6 small H100 recordings (within 0.4%), these
 * pin the source's allocations one by one.
 */
import { describe, expect, it } from 'vitest';
import { resolveHfConfig, type GemmaConfig } from '../../../engine/models/hf/config.ts';
import { PRESETS } from '../../../engine/models/presets.ts';
import { parsePlan } from '../../../engine/plan/parse.ts';
import { simulate } from '../../../engine/train/simulate.ts';
import { planGpu } from '../../../cli/gpus.ts';
import { allocationsOf, backwardStart, first, type Alloc } from './allocations.ts';

const B = 2;
const T = 128;
const small = (modelType: 'gemma2' | 'gemma3_text', extra: Record<string, unknown> = {}) => ({
  model_type: modelType,
  hidden_size: 256,
  intermediate_size: 512,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 64,
  vocab_size: 4096,
  sliding_window: 64,
  ...extra,
});


/** Every allocation of one step with its label and the event indices of its allocation and free. */
function allocations(hf: Record<string, unknown>, training: Record<string, unknown> = {}): Alloc[] {
  return allocationsOf(parsePlan({ format: 'memplan.plan', version: 1, model: { hf_config: hf }, training: { batch_size: B, seq_len: T, precision: 'bf16', optimizer: 'sgd', steps: 1, ...training } }));
}


describe('Gemma final logit soft-capping', () => {
  it('keeps tanh(logits / cap) [B, T, vocab] for backward; logits / cap dies at the next statement', () => {
    const all = allocations(small('gemma2'));
    const start = backwardStart(all);
    const tanh = first(all, 'tanh(logits / final_logit_softcapping)');
    expect(tanh.size).toBe(B * T * 4096 * 2); // bf16
    expect(tanh.alloc).toBeLessThan(start);
    expect(tanh.free).toBeGreaterThan(start);
    const divided = first(all, 'logits / final_logit_softcapping');
    expect(divided.size).toBe(B * T * 4096 * 2);
    expect(divided.free).toBeLessThan(start);
    // Gemma 3 has no final soft-capping by default
    expect(allocations(small('gemma3_text')).some((x) => x.label.startsWith('tanh(logits'))).toBe(false);
  });
});

describe('Gemma 2 attention soft-capping', () => {
  it('eager attention keeps tanh(scores / softcap) [B, H, T, T] per layer for backward', () => {
    const all = allocations(small('gemma2', { sliding_window: 4096 }), { attention: 'eager' });
    const start = backwardStart(all);
    for (const i of [0, 1]) {
      const tanh = first(all, `model.layers.${i}.self_attn attention tanh(scores / softcap)`);
      expect(tanh.size).toBe(B * 4 * T * T * 2);
      expect(tanh.free).toBeGreaterThan(start);
      expect(first(all, `model.layers.${i}.self_attn attention scores / softcap`).free).toBeLessThan(start);
    }
    // null attn_logit_softcapping: none
    expect(allocations(small('gemma2', { sliding_window: 4096, attn_logit_softcapping: null }), { attention: 'eager' }).some((x) => x.label.includes('softcap)'))).toBe(false);
  });

  it('SDPA drops the soft-cap (sdpa_attention_forward leaves it in **kwargs): no scores are made', () => {
    const all = allocations(small('gemma2', { sliding_window: 4096 }));
    expect(all.some((x) => x.label.includes('scores / softcap') || x.label.includes('tanh(scores'))).toBe(false);
    expect(all.some((x) => x.label.includes('q @ k^T'))).toBe(false);
  });
});

describe('Gemma RMSNorm', () => {
  it('computes in fp32: x.float() and the normalized x [B, T, hidden] are saved for backward, then the result is cast back', () => {
    const all = allocations(small('gemma2'));
    const start = backwardStart(all);
    const n = 'model.layers.0.input_layernorm';
    const up = first(all, `${n} x.float()`);
    const normed = first(all, `${n} x * rsqrt`);
    const scaled = first(all, `${n} output * (1 + weight)`);
    const out = first(all, `${n} type_as(x)`);
    for (const fp32 of [up, normed, scaled]) expect(fp32.size).toBe(B * T * 256 * 4);
    expect(out.size).toBe(B * T * 256 * 2);
    // saved by pow / mul and by the weight's mul: alive into backward
    expect(up.free).toBeGreaterThan(start);
    expect(normed.free).toBeGreaterThan(start);
    // the product before `.type_as(x)` and the squares are temporaries of the forward
    expect(scaled.free).toBeLessThan(start);
    expect(first(all, `${n} pow(2)`).free).toBeLessThan(start);
    // 1 + weight.float(): the weight's fp32 copy dies at once, 1 + weight [hidden] is saved
    expect(first(all, `${n} weight.float()`).free).toBeLessThan(first(all, `${n} output * (1 + weight)`).alloc);
    expect(first(all, `${n} 1 + weight`).free).toBeGreaterThan(start);
  });

  it('Gemma 3 norms each head of q and k ([B, H, T, head_dim] in fp32) after the transpose', () => {
    const all = allocations(small('gemma3_text'));
    expect(first(all, 'model.layers.0.self_attn.q_norm x.float()').size).toBe(B * 4 * T * 64 * 4);
    expect(first(all, 'model.layers.0.self_attn.k_norm x.float()').size).toBe(B * 2 * T * 64 * 4);
    expect(allocations(small('gemma2')).some((x) => x.label.includes('q_norm'))).toBe(false);
  });
});

describe('sliding and global layers', () => {
  it('past the window only the sliding layers get the mask (as a cuDNN bias); global layers stay causal', () => {
    // Gemma 2 alternates from a sliding layer: layer 0 sliding, layer 1 global
    const beyond = allocations(small('gemma2', { sliding_window: 64 }));
    expect(beyond.some((x) => x.label === 'sliding-window mask')).toBe(true);
    expect(first(beyond, 'model.layers.0.self_attn attention mask as bias').size).toBe(B * T * T * 2);
    expect(beyond.some((x) => x.label === 'model.layers.1.self_attn attention mask as bias')).toBe(false);
    // below the window no mask at all
    const below = allocations(small('gemma2', { sliding_window: 256 }));
    expect(below.some((x) => x.label.includes('mask as bias') || x.label === 'sliding-window mask')).toBe(false);
  });

  it('reads layer_types, or makes them: Gemma 2 alternates, Gemma 3 makes every sliding_window_pattern-th layer global', () => {
    const g2 = resolveHfConfig(small('gemma2', { num_hidden_layers: 4 })) as GemmaConfig;
    expect(g2.layerTypes).toEqual(['sliding_attention', 'full_attention', 'sliding_attention', 'full_attention']);
    const g3 = resolveHfConfig(small('gemma3_text', { num_hidden_layers: 12 })) as GemmaConfig;
    expect(g3.layerTypes.flatMap((t, i) => (t === 'full_attention' ? [i] : []))).toEqual([5, 11]);
    const given = resolveHfConfig(small('gemma3_text', { layer_types: ['full_attention', 'full_attention'] })) as GemmaConfig;
    expect(given.layerTypes).toEqual(['full_attention', 'full_attention']);
    expect(() => resolveHfConfig(small('gemma3_text', { layer_types: ['full_attention'] }))).toThrow(/model\.hf_config\.layer_types: must list/);
  });
});

describe('the scaled embedding', () => {
  it('Gemma 2 scales inside the embedding too (transformers 5.17): its 0-dim embed_scale buffer moves to the GPU after the weight', () => {
    const all = allocations(small('gemma2'));
    const weight = first(all, 'model.embed_tokens.weight');
    const buffer = first(all, 'model.embed_tokens.embed_scale');
    expect(buffer.size).toBe(2); // bf16
    expect(all.indexOf(buffer)).toBe(all.indexOf(weight) + 1); // the next allocation
    const scaled = first(all, 'model.embed_tokens * embed_scale');
    expect(scaled.size).toBe(B * T * 256 * 2);
    expect(first(all, 'model.embed_tokens').free).toBeLessThan(first(all, 'arange(T)').alloc);
    expect(all.some((a) => a.label === 'inputs_embeds * normalizer')).toBe(false);
  });

  it('Gemma 3 multiplies by its embed_scale buffer inside the embedding: the lookup dies at once', () => {
    const all = allocations(small('gemma3_text'));
    const scaled = first(all, 'model.embed_tokens * embed_scale');
    const lookup = first(all, 'model.embed_tokens');
    expect(lookup.free).toBeLessThan(first(all, 'arange(T)').alloc);
    expect(scaled.size).toBe(B * T * 256 * 2);
  });
});

describe('Gemma configs', () => {
  it('refuses the multimodal "gemma3" (Gemma3ForConditionalGeneration) and points to its text_config', () => {
    expect(() => resolveHfConfig({ model_type: 'gemma3', text_config: {} })).toThrow(/model\.hf_config\.model_type: "gemma3" is Gemma3ForConditionalGeneration .*"model_type": "gemma3_text"/);
    expect(() => resolveHfConfig(small('gemma3_text', { use_bidirectional_attention: true }))).toThrow(/use_bidirectional_attention/);
    expect(() => resolveHfConfig(small('gemma2', { architectures: ['Gemma2ForQuestionAnswering'] }))).toThrow(/architectures/);
    // transformers 5.17 has no Gemma3TextForTokenClassification (measured)
    expect(() => resolveHfConfig(small('gemma3_text', { architectures: ['Gemma3TextForTokenClassification'] }))).toThrow(/architectures: "Gemma3TextForTokenClassification" is not simulated yet/);
  });

  it('takes transformers defaults: Gemma 2 soft-caps at 50 and 30, Gemma 3 not; both tie the embeddings', () => {
    const g2 = resolveHfConfig({ model_type: 'gemma2' }) as GemmaConfig;
    expect([g2.attnSoftcap, g2.finalSoftcap, g2.tieWordEmbeddings, g2.vocabSize]).toEqual([50, 30, true, 256000]);
    const g3 = resolveHfConfig({ model_type: 'gemma3_text' }) as GemmaConfig;
    expect([g3.attnSoftcap, g3.finalSoftcap, g3.tieWordEmbeddings, g3.vocabSize]).toEqual([null, null, true, 262208]);
  });
});

describe('Gemma presets', () => {
  const gemmas = Object.keys(PRESETS).filter((n) => n.startsWith('gemma-'));
  it('lists Gemma 2 2B/9B/27B and Gemma 3 1B/4B/12B/27B', () => {
    expect(gemmas).toEqual(['gemma-2-2b', 'gemma-2-9b', 'gemma-2-27b', 'gemma-3-1b', 'gemma-3-4b', 'gemma-3-12b', 'gemma-3-27b']);
  });

  const modes: [string, Record<string, unknown>][] = [
    ['bf16', { precision: 'bf16' }],
    ['bf16 checkpointed', { precision: 'bf16', activation_checkpointing: true }],
    ['AMP bf16', { precision: 'amp_bf16' }],
    ['AMP bf16 checkpointed', { precision: 'amp_bf16', activation_checkpointing: true }],
  ];
  for (const name of gemmas) {
    it(`${name} simulates in bf16 and AMP, with and without checkpointing, checkpointing keeping less after the forward`, () => {
      const peaks = modes.map(([, training]) => {
        const plan = parsePlan({ format: 'memplan.plan', version: 1, model: { preset: name }, training: { batch_size: 1, seq_len: 2048, optimizer: 'adamw', steps: 1, ...training }, gpu: { memory_limit_bytes: 2 ** 41 } });
        const r = simulate(plan, { device: planGpu(plan), untilSteady: false, timelinePoints: 0, peakDetails: false });
        expect(r.oom).toBeNull();
        // measured at published sizes (Gemma 2 2B, Gemma 3 1B): no family caveat; medium for the 2 TiB custom GPU
        expect(r.caveats!.items.some((c) => c.id === 'family_not_measured')).toBe(false);
        expect(r.caveats!.items).toContainEqual(expect.objectContaining({ id: 'custom_gpu' }));
        expect(r.caveats!.confidence).toBe('medium');
        return r.steps[0]!.after_forward_bytes[0]!;
      });
      // what the forward leaves for backward (the peak of a large model at batch 1 is the optimizer's)
      expect(peaks[1]).toBeLessThan(peaks[0]!);
      expect(peaks[3]).toBeLessThan(peaks[2]!);
    });
  }
});
