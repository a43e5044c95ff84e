/**
 * The simulator is bounded and says so before it starts (engine/plan/limits.ts): the plans of issue 12's "Seen"
 * list answer at once with "too large to simulate: ..." at the field that makes them so, the work estimates stay
 * true to the events the simulator makes, and legitimate extremes still simulate.
 */
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import catalogJson from '../../../resources/gpus.json' with { type: 'json' };
import { parseGpuCatalog, planGpu, safeParsePlan, simulate, simulateResultSchema, type Plan } from '../../../engine/index.ts';
import { estimateWork, LIMITS } from '../../../engine/plan/limits.ts';
import { resolveHfConfig } from '../../../engine/models/hf/config.ts';
import { PRESETS, PRESET_NAMES } from '../../../engine/models/presets.ts';

const catalog = parseGpuCatalog(catalogJson);
const convTable: unknown = JSON.parse(gunzipSync(readFileSync(new URL('../../../resources/cudnn-workspaces-h100.json.gz', import.meta.url))).toString());
const plan = (model: unknown, training: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) => ({ format: 'memplan.plan', version: 1, model, training: { batch_size: 4, ...training }, ...extra });
const mlp = { input_features: 64, layers: [{ type: 'linear', in_features: 64, out_features: 64 }, { type: 'relu' }, { type: 'linear', in_features: 64, out_features: 10 }] };

/** One of every layer type, convolutions first. */
const everyLayer = {
  input_shape: [3, 16, 16],
  layers: [
    { type: 'conv2d', in_channels: 3, out_channels: 8, kernel_size: 3, padding: 1 },
    { type: 'batch_norm2d', num_features: 8 },
    { type: 'residual', layers: [{ type: 'conv2d', in_channels: 8, out_channels: 8, kernel_size: 3, padding: 1 }, { type: 'relu' }] },
    { type: 'max_pool2d', kernel_size: 2 },
    { type: 'adaptive_avg_pool2d', output_size: 1 },
    { type: 'flatten' },
    { type: 'repeat', count: 3, layers: [{ type: 'linear', in_features: 8, out_features: 8 }, { type: 'layer_norm', normalized_shape: 8 }, { type: 'gelu' }, { type: 'dropout', p: 0.1 }] },
    { type: 'rms_norm', normalized_shape: 8 },
    { type: 'silu' },
    { type: 'tanh' },
    { type: 'sigmoid' },
    { type: 'linear', in_features: 8, out_features: 10 },
  ],
  };

/** The plan's issues by path, and how long reading it took. */
function read(value: unknown) {
  const t0 = performance.now();
  const r = safeParsePlan(value, { catalog });
  const ms = performance.now() - t0;
  if (r.ok) throw new Error('expected issues');
  return { issues: Object.fromEntries(r.issues.map((i) => [i.path, i.message])), ms };
}

function valid(value: unknown): Plan {
  const r = safeParsePlan(value, { catalog });
  if (!r.ok) throw new Error(r.issues.map((i) => `${i.path}: ${i.message}`).join('\n'));
  return r.plan;
}

/** Every allocator event of a simulation, counted. */
function simulatedEvents(p: Plan, options: { untilSteady?: boolean; maxEvents?: number } = {}): number {
  let events = 0;
  simulate(p, { device: planGpu(p, catalog, convTable), onTrace: () => void events++, timelinePoints: 0, peakDetails: false, ...options });
  return events;
}

function hfOf(p: Plan) {
  const m = p.model;
  if ('hf_config' in m) return resolveHfConfig(m.hf_config);
  if ('preset' in m && PRESETS[m.preset]!.kind === 'hf') return resolveHfConfig((PRESETS[m.preset] as { config: Record<string, unknown> }).config);
  return null;
}

describe('the cases of issue 12, refused at once at their field', () => {
  it('a billion accumulation steps', () => {
    const { issues, ms } = read(plan({ preset: 'gpt2' }, { seq_len: 256, grad_accumulation_steps: 1_000_000_000 }));
    expect(issues['training.grad_accumulation_steps']).toBe(
      'too large to simulate: 1,000,000,000 micro-steps per optimizer step; the limit is 10,000. The peak does not change past the second micro-step: plan with 2 to see it',
    );
    expect(ms).toBeLessThan(1000);
  });

  it('accumulation under the micro-step limit but over the event limit names the product', () => {
    const { issues } = read(plan({ preset: 'gpt2-xl' }, { grad_accumulation_steps: 5000 }));
    expect(issues['training.grad_accumulation_steps']).toMatch(/^too large to simulate: 4 steps x 5,000 micro-steps x about [\d,]+ allocator events each = about [\d,]+ events; the limit is 10,000,000/);
  });

  it('ten million GPT-2 blocks', () => {
    const { issues, ms } = read(plan({ hf_config: { model_type: 'gpt2', n_layer: 10_000_000 } }));
    expect(issues['model.hf_config.n_layer']).toBe('too large to simulate: 10,000,000 blocks; the limit is 100,000 (the model is built and its graph held in memory)');
    expect(ms).toBeLessThan(1000);
  });

  it('blocks under the layer limit whose one micro-step is too large', () => {
    const { issues } = read(plan({ hf_config: { model_type: 'llama', num_hidden_layers: 50_000, hidden_size: 64, num_attention_heads: 4, intermediate_size: 128 } }));
    expect(issues['model.hf_config.num_hidden_layers']).toMatch(/^too large to simulate: one micro-step of 50,000 blocks makes about [\d,]+ allocator events; the limit is 1,000,000/);
  });

  it('a million relu layers, and a repeat that expands to too many', () => {
    const million = plan({ input_features: 64, layers: [{ type: 'linear', in_features: 64, out_features: 64 }, ...Array.from({ length: 1_000_000 }, () => ({ type: 'relu' }))] });
    const { issues, ms } = read(million);
    expect(issues['model.layers']).toMatch(/^too large to simulate: more than 100,000 layers; the limit is 100,000/);
    expect(ms).toBeLessThan(1000);
    const nested = read(plan({ input_features: 8, layers: [{ type: 'repeat', count: 1_000_000_000, layers: [{ type: 'repeat', count: 1_000_000_000, layers: [{ type: 'linear', in_features: 8, out_features: 8 }] }] }] }));
    expect(nested.issues['model.layers']).toBe('too large to simulate: more than 10^15 layers; the limit is 100,000 (the model is built and its graph held in memory)');
  });

  it('a layer list without parameters has nothing to train', () => {
    expect(read(plan({ input_features: 64, layers: [{ type: 'relu' }, { type: 'repeat', count: 3, layers: [{ type: 'gelu' }] }] })).issues['model.layers']).toMatch(
      /^no layer has parameters, so there is nothing to train: loss.backward\(\) would raise "element 0 of tensors does not require grad"/,
    );
  });

  it('a memory cap of 80 bytes: did you mean 80 GB?', () => {
    const { issues } = read(plan({ preset: 'gpt2' }, {}, { gpu: { memory_limit_bytes: 80 } }));
    expect(issues['gpu.memory_limit_bytes']).toBe(
      "80 bytes is less than the smallest segment PyTorch's allocator reserves (2 MiB), so every allocation would run out of memory; the cap is in bytes: did you mean 80 GB (80000000000) or 80 GiB (85899345920)?",
    );
    expect(read(plan({ preset: 'gpt2' }, {}, { gpu: { memory_limit_bytes: 2 ** 51 } })).issues['gpu.memory_limit_bytes']).toMatch(/^too large to simulate: a cap of 2251799813685248 bytes \(2 PiB\); the limit is 1 PiB/);
    expect(safeParsePlan(plan({ preset: 'gpt2' }, {}, { gpu: { memory_limit_bytes: 2 * 1024 * 1024 } })).ok).toBe(true);
  });

  it('too many parameters, named at the layer that holds them', () => {
    const { issues } = read(plan({ input_features: 8, layers: [{ type: 'linear', in_features: 8, out_features: 8 }, { type: 'embedding', num_embeddings: 1e9, embedding_dim: 1e5 }] }));
    expect(issues['model.layers']).toMatch(/^too large to simulate: 100,000,000,00\d,\d{3} parameters; the limit is 10,000,000,000,000/);
  });

  it("a config.json whose vocabulary holds most of the parameters is named at its vocab_size, one whose single block is past the limit at its hidden_size, else at its layers", () => {
    const config = { model_type: 'llama', hidden_size: 4096, intermediate_size: 11008, num_hidden_layers: 2, num_attention_heads: 32, vocab_size: 1e12 };
    const huge = read(plan({ hf_config: config })).issues;
    expect(Object.keys(huge)).toEqual(['model.hf_config.vocab_size']);
    expect(huge['model.hf_config.vocab_size']).toMatch(/^too large to simulate: more than 10\^15 parameters/);
    const wide = read(plan({ hf_config: { ...config, vocab_size: 32000, hidden_size: 2 ** 21, intermediate_size: 2 ** 21, num_attention_heads: 16384 } })).issues;
    // one block alone holds 3.1 x 10^13 parameters, most in its attention: the width is the cause, not the two layers
    expect(Object.keys(wide)).toEqual(['model.hf_config.hidden_size']);
    // 200 blocks of 7 x 10^10 each: the number of layers
    const deep = read(plan({ hf_config: { ...config, vocab_size: 32000, hidden_size: 2 ** 16, intermediate_size: 2 ** 18, num_attention_heads: 512, num_hidden_layers: 200 } })).issues;
    expect(Object.keys(deep)).toEqual(['model.hf_config.num_hidden_layers']);
    expect(deep['model.hf_config.num_hidden_layers']).toMatch(/^too large to simulate: [\d,]+ parameters; the limit is 10,000,000,000,000/);
  });

  describe('one block alone past the parameter limit is named at the field whose piece of the block holds most of it', () => {
    const llama = { model_type: 'llama', hidden_size: 4096, intermediate_size: 11008, num_hidden_layers: 2, num_attention_heads: 32, vocab_size: 32000 };
    const mixtral = { model_type: 'mixtral', hidden_size: 4096, intermediate_size: 14336, num_hidden_layers: 2, num_attention_heads: 32, num_key_value_heads: 8, vocab_size: 32000, num_local_experts: 8 };
    const qwen3Moe = { model_type: 'qwen3_moe', hidden_size: 2048, intermediate_size: 6144, moe_intermediate_size: 768, num_hidden_layers: 2, num_attention_heads: 32, num_key_value_heads: 4, vocab_size: 32000, num_experts: 128, num_experts_per_tok: 8 };
    /** The config's one issue: its field and message. */
    const only = (config: Record<string, unknown>) => {
      const { issues } = read(plan({ hf_config: config }));
      expect(Object.keys(issues)).toHaveLength(1);
      return Object.entries(issues)[0]!;
    };

    it('an intermediate_size too large (a typo of 1.1 x 10^9), not the hidden_size of 4,096', () => {
      // the MLP, 3 x 4,096 x 1,100,800,000 = 1.35 x 10^13 parameters, is nearly the whole block
      expect(only({ ...llama, intermediate_size: 1_100_800_000 })).toEqual([
        'model.hf_config.intermediate_size',
        'too large to simulate: intermediate_size 1,100,800,000 makes one block alone hold 13,526,697,517,056 parameters (13,526,630,400,000 of them in its MLP); the limit is 10,000,000,000,000 (10^13) for the whole model, where every byte count stays exact',
      ]);
      // BERT's MLP (intermediate.dense, output.dense) and GPT-2's (n_inner, when the config sets it)
      expect(only({ model_type: 'bert', num_hidden_layers: 2, intermediate_size: 7e9 })[0]).toBe('model.hf_config.intermediate_size');
      expect(only({ model_type: 'gpt2', n_embd: 1024, n_head: 16, n_layer: 2, n_inner: 5e9 })[0]).toBe('model.hf_config.n_inner');
    });

    it("a hidden_size too large where attention holds most of the block, or GPT-2's n_embd where n_inner is its default 4 x n_embd", () => {
      const [field, message] = only({ ...llama, hidden_size: 4_096_000 });
      expect(field).toBe('model.hf_config.hidden_size');
      expect(message).toMatch(/^too large to simulate: hidden_size 4,096,000 makes one block alone hold 67,244,138,496,000 parameters \(67,108,868,096,000 of them in its attention\)/);
      const [gpt2Field, gpt2Message] = only({ model_type: 'gpt2', n_embd: 2 ** 21, n_head: 16384, n_layer: 2 });
      expect(gpt2Field).toBe('model.hf_config.n_embd');
      expect(gpt2Message).toMatch(/^too large to simulate: n_embd 2,097,152 makes one block alone hold [\d,]+ parameters \([\d,]+ of them in its MLP\)/);
    });

    it('the number of experts (Mixtral num_local_experts, Qwen3-MoE num_experts), or the width of each where that is the larger factor', () => {
      const [experts, message] = only({ ...mixtral, num_local_experts: 100_000 });
      expect(experts).toBe('model.hf_config.num_local_experts');
      expect(message).toMatch(/^too large to simulate: num_local_experts 100,000 makes one block alone hold 17,616,528,351,232 parameters \(17,616,486,400,000 of them in its experts\)/);
      // Mixtral's experts are intermediate_size wide
      expect(only({ ...mixtral, intermediate_size: 200_000_000 })[0]).toBe('model.hf_config.intermediate_size');
      expect(only({ ...qwen3Moe, num_experts: 3_000_000 })[0]).toBe('model.hf_config.num_experts');
      expect(only({ ...qwen3Moe, moe_intermediate_size: 1e9 })[0]).toBe('model.hf_config.moe_intermediate_size');
    });
  });
});

describe('the work estimate', () => {
  // Every preset at a short sequence, layer lists of every type, accumulation and checkpointing: the estimate is
  // never below the events simulated, and within a few times of them (a limit is then about what it says).
  const cases: [string, unknown][] = [
    ...PRESET_NAMES.map((name): [string, unknown] => [name, plan({ preset: name }, { batch_size: 1, seq_len: 64, image_size: 64 }, { gpu: { memory_limit_bytes: 2 ** 46 } })]),
    ['mlp accumulation 4', plan(mlp, { grad_accumulation_steps: 4 })],
    ['gpt2 amp checkpointed, accumulation 3', plan({ hf_config: { model_type: 'gpt2', n_layer: 6, n_embd: 64, n_head: 4 } }, { seq_len: 32, precision: 'amp_fp16', activation_checkpointing: true, grad_accumulation_steps: 3 })],
    ['llama reentrant eager', plan({ hf_config: { model_type: 'llama', num_hidden_layers: 4, hidden_size: 64, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 128 } }, { seq_len: 32, activation_checkpointing: 'reentrant', attention: 'eager' })],
    // LoRA on every adaptable module: the adapter paths' events on top of the blocks'
    ['gpt2 LoRA on every Conv1D, amp reentrant eager, accumulation 2', plan({ hf_config: { model_type: 'gpt2', n_layer: 6, n_embd: 64, n_head: 4 } }, { seq_len: 32, precision: 'amp_bf16', activation_checkpointing: 'reentrant', attention: 'eager', grad_accumulation_steps: 2, lora: { r: 8, alpha: 16, dropout: 0.1, target_modules: ['c_attn', 'c_proj', 'c_fc'] } })],
    ['llama LoRA on every linear, amp reentrant eager', plan({ hf_config: { model_type: 'llama', num_hidden_layers: 4, hidden_size: 64, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 128 } }, { seq_len: 32, precision: 'amp_bf16', activation_checkpointing: 'reentrant', attention: 'eager', lora: { r: 8, alpha: 16, dropout: 0.1, target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] } })],
    ['qwen3_moe checkpointed, LoRA on q/v', plan({ hf_config: { model_type: 'qwen3_moe', num_hidden_layers: 4, hidden_size: 64, num_attention_heads: 4, num_key_value_heads: 2, head_dim: 16, moe_intermediate_size: 32, num_experts: 8, num_experts_per_tok: 2, vocab_size: 1024 } }, { seq_len: 32, precision: 'amp_bf16', activation_checkpointing: 'reentrant', attention: 'eager', lora: { r: 8, alpha: 16, target_modules: ['q_proj', 'v_proj'] } })],
    // sequence classifiers: the pooler or the last token's logits, PEFT's classifier copy under LoRA
    ['bert classifier, LoRA on every Linear, eager, amp fp16 reentrant', plan({ hf_config: { model_type: 'bert', architectures: ['BertForSequenceClassification'], num_hidden_layers: 2, hidden_size: 64, num_attention_heads: 4, intermediate_size: 128, vocab_size: 1000 } }, { seq_len: 32, precision: 'amp_fp16', activation_checkpointing: 'reentrant', attention: 'eager', lora: { r: 8, alpha: 16, dropout: 0.1, target_modules: ['query', 'key', 'value', 'dense'] } })],
    ['xlm-roberta classifier, checkpointed', plan({ hf_config: { model_type: 'xlm-roberta', architectures: ['XLMRobertaForSequenceClassification'], num_hidden_layers: 2, hidden_size: 64, num_attention_heads: 4, intermediate_size: 128, vocab_size: 1000, max_position_embeddings: 66 } }, { seq_len: 32, activation_checkpointing: true })],
    ['llama classifier, LoRA on every linear, amp reentrant eager', plan({ hf_config: { model_type: 'llama', architectures: ['LlamaForSequenceClassification'], pad_token_id: 0, num_hidden_layers: 4, hidden_size: 64, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 128 } }, { seq_len: 32, precision: 'amp_bf16', activation_checkpointing: 'reentrant', attention: 'eager', lora: { r: 8, alpha: 16, dropout: 0.1, target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] } })],
    // regression and token classifiers: MSELoss on a squeezed scalar at batch 1; dropout and score on every token
    ['llama regression at batch 1, amp reentrant', plan({ hf_config: { model_type: 'llama', architectures: ['LlamaForSequenceClassification'], pad_token_id: 0, num_labels: 1, num_hidden_layers: 4, hidden_size: 64, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 128 } }, { batch_size: 1, seq_len: 32, precision: 'amp_bf16', activation_checkpointing: 'reentrant' })],
    ['llama token classifier, LoRA on q/v, reentrant eager', plan({ hf_config: { model_type: 'llama', architectures: ['LlamaForTokenClassification'], num_labels: 9, num_hidden_layers: 4, hidden_size: 64, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 128 } }, { seq_len: 32, precision: 'bf16', activation_checkpointing: 'reentrant', attention: 'eager', lora: { r: 8, alpha: 16, target_modules: ['q_proj', 'v_proj'] } })],
    ['bert token classifier, amp, accumulation 2', plan({ hf_config: { model_type: 'bert', architectures: ['BertForTokenClassification'], num_labels: 9, num_hidden_layers: 2, hidden_size: 64, num_attention_heads: 4, intermediate_size: 128, vocab_size: 1000 } }, { seq_len: 32, precision: 'amp_bf16', grad_accumulation_steps: 2 })],
    ['gemma2 classifier, eager', plan({ hf_config: { model_type: 'gemma2', architectures: ['Gemma2ForSequenceClassification'], pad_token_id: 0, num_hidden_layers: 2, hidden_size: 64, num_attention_heads: 4, num_key_value_heads: 2, head_dim: 16, intermediate_size: 128, vocab_size: 1000 } }, { seq_len: 32, attention: 'eager' })],
    ['every layer type, amp checkpointed', plan(everyLayer, { precision: 'amp_bf16', activation_checkpointing: true })],
    ['every layer type, fp32', plan(everyLayer, { precision: 'fp32' })],
    ['every layer type, fp16', plan(everyLayer, { precision: 'fp16' })],
    ['tokens and attention', plan({ input_shape: [16], layers: [{ type: 'embedding', num_embeddings: 100, embedding_dim: 32 }, { type: 'repeat', count: 2, layers: [{ type: 'residual', layers: [{ type: 'self_attention', embed_dim: 32, num_heads: 4 }] }] }, { type: 'linear', in_features: 32, out_features: 100 }] }, { precision: 'bf16' })],
  ];
  it.each(cases)("bounds the events of the plan's own steps: %s", (_name, value) => {
    const p = valid(value);
    const work = estimateWork(p, hfOf(p));
    const actual = simulatedEvents({ ...p, training: { ...p.training, steps: work.steps } }, { untilSteady: false });
    expect(work.events).toBeGreaterThanOrEqual(actual);
    expect(work.events).toBeLessThanOrEqual(6 * actual);
  });

  it("stops the steps past the plan's own at the work limit, and says steady state is not proven", () => {
    // Checkpointed convolutions and linears in AMP take more than the plan's 3 steps + 1 to repeat a state.
    const p = valid(plan(everyLayer, { precision: 'amp_bf16', activation_checkpointing: true }));
    const run = (maxEvents?: number) => simulate(p, { device: planGpu(p, catalog, convTable), timelinePoints: 0, peakDetails: false, maxEvents });
    const settled = run();
    expect(settled.steps.length).toBeGreaterThan(p.training.steps + 1);
    expect(settled.notes.map((n) => n.id)).not.toContain('not_steady');
    // The plan's own steps always run; none after them fits a budget they already spent.
    const bounded = run(1);
    expect(bounded.steps.length).toBe(p.training.steps);
    expect(bounded.peak_reserved_bytes).toBe(Math.max(...settled.steps.slice(0, p.training.steps).map((s) => s.peak_reserved_bytes)));
    // A budget between: more steps than the plan's, fewer than to steady state.
    const between = run(simulatedEvents(p, { untilSteady: false }) * 1.5);
    expect(between.steps.length).toBeGreaterThan(p.training.steps);
    expect(between.steps.length).toBeLessThan(settled.steps.length);
    expect(bounded.notes).toContainEqual({ id: 'not_steady', steps: p.training.steps, reason: 'work_limit' });
    expect(simulateResultSchema.parse(bounded)).toEqual(bounded);
  });

  it('with garbage collection under a cap the state never provably repeats: 20 steps, said so', () => {
    const p = valid(plan(mlp, {}, { gpu: { memory_limit_bytes: 2 ** 31 }, allocator: { conf: 'garbage_collection_threshold:0.6' } }));
    const r = simulate(p, { device: planGpu(p, catalog), timelinePoints: 0, peakDetails: false });
    expect(r.notes).toContainEqual({ id: 'not_steady', steps: 20, reason: 'garbage_collection' });
  });

  it('the peak does not change past the second micro-step (what the micro-step message advises)', () => {
    for (const model of [mlp, { preset: 'gpt2' }, { hf_config: { model_type: 'bert', num_hidden_layers: 2 } }]) {
      const peaks = [2, 5].map((a) => {
        const p = valid(plan(model, { batch_size: 8, seq_len: 128, precision: 'amp_fp16', grad_accumulation_steps: a }));
        const r = simulate(p, { device: planGpu(p, catalog), timelinePoints: 0, peakDetails: false });
        return [r.peak_allocated_bytes, r.peak_reserved_bytes];
      });
      expect(peaks[1]).toEqual(peaks[0]);
    }
  });
});

describe('legitimate extremes still simulate', () => {
  it('a 405B-parameter Llama (126 blocks, hidden 16384, bf16, seq 4096, checkpointing) on a GPU large enough', () => {
    const [h, layers, inter, vocab, kv] = [16384, 126, 53248, 128256, 1024];
    const value = plan(
      { hf_config: { model_type: 'llama', num_hidden_layers: layers, hidden_size: h, num_attention_heads: 128, num_key_value_heads: 8, intermediate_size: inter, vocab_size: vocab, max_position_embeddings: 131072 } },
      { batch_size: 1, seq_len: 4096, precision: 'bf16', activation_checkpointing: true },
      { gpu: { memory_limit_bytes: 2 ** 44 } },
    );
    const p = valid(value);
    const t0 = performance.now();
    const r = simulateResultSchema.parse(JSON.parse(JSON.stringify(simulate(p, { device: planGpu(p, catalog) }), (_k, v: unknown) => (ArrayBuffer.isView(v) ? Array.from(v as Float64Array) : v))));
    const seconds = (performance.now() - t0) / 1000;
    // embeddings and head untied; per block q, o (h x h), k, v (kv x h), gate, up, down (inter x h), two norms
    const parameters = 2 * vocab * h + layers * (2 * h * h + 2 * kv * h + 3 * inter * h + 2 * h) + h;
    expect(r.model.parameter_count).toBe(parameters);
    expect(parameters).toBeGreaterThan(405e9);
    expect(r.fits).toBe(true);
    expect(r.peak_reserved_bytes).toBeGreaterThan(4 * parameters); // weights, gradients, two AdamW states in bf16
    console.log(`405B Llama: ${parameters.toLocaleString('en-US')} parameters, peak reserved ${r.peak_reserved_bytes} bytes, ${seconds.toFixed(1)} s`);
  });

  it('a batch of 1,000,000 rows through a small MLP', () => {
    const p = valid(plan({ input_features: 32, layers: [{ type: 'linear', in_features: 32, out_features: 64 }, { type: 'relu' }, { type: 'linear', in_features: 64, out_features: 10 }] }, { batch_size: 1_000_000 }));
    const r = simulate(p, { device: planGpu(p, catalog) });
    expect(r.fits).toBe(true);
    expect(r.peak_allocated_bytes).toBeGreaterThan(1_000_000 * (32 + 64 + 64 + 10) * 4);
    expect(Number.isSafeInteger(r.peak_reserved_bytes)).toBe(true);
  });

  it('the largest plans under the limits are accepted', () => {
    expect(safeParsePlan(plan(mlp, { grad_accumulation_steps: LIMITS.micro_steps })).ok).toBe(true);
    const deep = plan({ input_features: 8, layers: [{ type: 'linear', in_features: 8, out_features: 8 }, { type: 'repeat', count: LIMITS.layers - 1, layers: [{ type: 'relu' }] }] });
    expect(safeParsePlan(deep).ok).toBe(true);
  });
});
