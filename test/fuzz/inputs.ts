/**
 * Inputs for the fuzz tests (fast-check): plans, layer lists and config.json files as a user might write them,
 * small enough to simulate in milliseconds, and mutations of them (a field set to a hostile value, deleted, or
 * a stray key added) that reach every check of the plan and the limits. And the check every outcome must pass:
 * a valid result (schema-valid, every number finite) or a clear error, never an internal one.
 */
import fc from 'fast-check';
import { expect } from 'vitest';
import { PRESET_NAMES, TORCHVISION_MODELS, type EngineAnswer } from '../../engine/index.ts';

const dim = fc.integer({ min: 1, max: 48 });

/** A layer of any type, with small sizes (shapes that do not line up are part of the test). */
export const layer: fc.Arbitrary<unknown> = fc.letrec<{ layer: unknown }>((tie) => ({
  layer: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.record({ type: fc.constant('linear'), in_features: dim, out_features: dim, bias: fc.boolean() }),
    fc.record({ type: fc.constantFrom('relu', 'gelu', 'silu', 'tanh', 'sigmoid', 'flatten') }),
    fc.record({ type: fc.constant('dropout'), p: fc.double({ min: 0, max: 1, noNaN: true }) }),
    fc.record({ type: fc.constantFrom('layer_norm', 'rms_norm'), normalized_shape: dim }),
    fc.record({ type: fc.constant('conv2d'), in_channels: fc.integer({ min: 1, max: 8 }), out_channels: fc.integer({ min: 1, max: 8 }), kernel_size: fc.integer({ min: 1, max: 3 }), padding: fc.integer({ min: 0, max: 1 }) }),
    fc.record({ type: fc.constant('batch_norm2d'), num_features: fc.integer({ min: 1, max: 8 }) }),
    fc.record({ type: fc.constant('max_pool2d'), kernel_size: fc.integer({ min: 1, max: 2 }) }),
    fc.record({ type: fc.constant('adaptive_avg_pool2d'), output_size: fc.constantFrom(1, 2) }),
    fc.record({ type: fc.constant('embedding'), num_embeddings: dim, embedding_dim: dim }),
    fc.record({ type: fc.constant('self_attention'), embed_dim: fc.constantFrom(8, 16, 32), num_heads: fc.constantFrom(1, 2, 4, 3) }),
    fc.record({ type: fc.constant('residual'), layers: fc.array(tie('layer'), { minLength: 1, maxLength: 3 }) }),
    fc.record({ type: fc.constant('repeat'), count: fc.integer({ min: 1, max: 3 }), layers: fc.array(tie('layer'), { minLength: 1, maxLength: 3 }) }),
  ),
})).layer;

/** A layer list model: mostly an MLP-like list that lines up, sometimes any layers. */
export const layerListModel = fc.oneof(
  fc.record({
    input_features: fc.constantFrom(8, 16, 32),
    layers: fc.tuple(fc.constantFrom(8, 16, 32), fc.array(fc.constantFrom({ type: 'relu' }, { type: 'gelu' }, { type: 'layer_norm' }, { type: 'dropout', p: 0.1 }), { maxLength: 3 }), fc.integer({ min: 2, max: 16 })).map(([f, middle, classes]) => [
      { type: 'linear', in_features: f, out_features: f },
      ...middle.map((m) => (m.type === 'layer_norm' ? { type: 'layer_norm', normalized_shape: f } : m)),
      { type: 'linear', in_features: f, out_features: classes },
    ]),
  }),
  fc.record({ input_features: dim, layers: fc.array(layer, { minLength: 1, maxLength: 5 }) }),
  fc.record({ input_shape: fc.oneof(fc.tuple(fc.integer({ min: 1, max: 8 }), fc.constantFrom(4, 8, 16), fc.constantFrom(4, 8, 16)), fc.tuple(fc.constantFrom(4, 8), fc.constantFrom(8, 16, 32))), layers: fc.array(layer, { minLength: 1, maxLength: 5 }) }),
);

/** A config.json of each simulated family, small. */
export const hfConfig = fc.oneof(
  fc.record({ model_type: fc.constant('gpt2'), n_layer: fc.integer({ min: 1, max: 3 }), n_embd: fc.constantFrom(32, 64), n_head: fc.constantFrom(1, 2, 4), vocab_size: fc.integer({ min: 16, max: 2000 }) }),
  fc.record({
    model_type: fc.constantFrom('llama', 'mistral', 'qwen2'),
    num_hidden_layers: fc.integer({ min: 1, max: 3 }),
    hidden_size: fc.constantFrom(32, 64),
    num_attention_heads: fc.constantFrom(2, 4),
    num_key_value_heads: fc.constantFrom(1, 2),
    intermediate_size: fc.integer({ min: 8, max: 256 }),
    vocab_size: fc.integer({ min: 16, max: 2000 }),
  }),
  fc.record({ model_type: fc.constant('bert'), num_hidden_layers: fc.integer({ min: 1, max: 3 }), hidden_size: fc.constantFrom(32, 64), num_attention_heads: fc.constantFrom(2, 4), intermediate_size: fc.integer({ min: 8, max: 256 }), vocab_size: fc.integer({ min: 16, max: 2000 }) }),
);

const training = fc.record(
  {
    batch_size: fc.integer({ min: 1, max: 64 }),
    seq_len: fc.integer({ min: 1, max: 128 }),
    image_size: fc.constantFrom(32, 64),
    precision: fc.constantFrom('fp32', 'amp_fp16', 'amp_bf16', 'bf16', 'fp16'),
    optimizer: fc.constantFrom('sgd', 'sgd_momentum', 'adam', 'adamw'),
    optimizer_impl: fc.constantFrom('foreach', 'fused', 'for_loop'),
    grad_accumulation_steps: fc.integer({ min: 1, max: 3 }),
    activation_checkpointing: fc.constantFrom(false, true, 'non_reentrant', 'reentrant'),
    attention: fc.constantFrom('sdpa', 'eager'),
    steps: fc.integer({ min: 1, max: 4 }),
  },
  { requiredKeys: ['batch_size'] },
);

const gpu = fc.option(
  fc.oneof(fc.record({ name: fc.constantFrom('h100-sxm', 'a100-40gb', 'NVIDIA H100 80GB HBM3', 'rtx-4090', 'mi300x') }), fc.record({ memory_limit_bytes: fc.integer({ min: 2 ** 21, max: 2 ** 36 }) })),
  { nil: undefined },
);

/** A plan as a user might write it (small models: presets only at tiny batches and short sequences). */
export const plan = fc
  .record({
    model: fc.oneof(
      { weight: 4, arbitrary: layerListModel },
      { weight: 3, arbitrary: hfConfig.map((c) => ({ hf_config: c })) },
      { weight: 1, arbitrary: fc.record({ torchvision: fc.constantFrom(...TORCHVISION_MODELS), num_classes: fc.integer({ min: 1, max: 100 }) }) },
      { weight: 1, arbitrary: fc.record({ preset: fc.constantFrom(...PRESET_NAMES.filter((n) => /gpt2$|bert-base|resnet18|qwen2.5-0.5b|tinyllama/.test(n))) }) },
    ),
    training,
    gpu,
    allocator: fc.option(fc.record({ conf: fc.constantFrom('', 'expandable_segments:True', 'max_split_size_mb:64', 'garbage_collection_threshold:0.8,max_split_size_mb:128', 'roundup_power2_divisions:4', 'bogus:1') }), { nil: undefined }),
  })
  .map(({ model, training, gpu, allocator }) => ({
    format: 'memplan.plan',
    version: 1,
    model,
    training: 'preset' in model || 'torchvision' in model ? { ...training, batch_size: Math.min(training.batch_size, 2), seq_len: Math.min(training.seq_len ?? 64, 64) } : training,
    ...(gpu ? { gpu } : {}),
    ...(allocator ? { allocator } : {}),
  }));

/** Values a mutation puts in a field: wrong types, edge numbers, the limits' neighbours, text. */
export const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(0, -1, 1.5, 2, 1000, 80, 2 ** 31, 2 ** 53, 2 ** 53 + 2, 1e308, -0, Number.MIN_VALUE, 100_001, 10_001, 1e7, 1e9),
  fc.constantFrom('', '8', 'x', '80GB', 'NaN', 'Infinity', '__proto__', 'constructor', null, true, false, [], {}, [1, 2], { type: 'relu' }),
  fc.jsonValue({ maxDepth: 2 }),
);

/** A path into a JSON value, chosen by walking it at random (the walk's choices drawn by fast-check). */
function pathsOf(value: unknown, prefix: (string | number)[] = [], out: (string | number)[][] = []): (string | number)[][] {
  out.push(prefix);
  if (Array.isArray(value)) value.forEach((v, i) => pathsOf(v, [...prefix, i], out));
  else if (typeof value === 'object' && value !== null) for (const [k, v] of Object.entries(value)) pathsOf(v, [...prefix, k], out);
  return out;
}

type Mutation = { kind: 'set' | 'scale' | 'delete' | 'add'; pick: number; value: unknown; key: string; factor: number };

export const mutation: fc.Arbitrary<Mutation> = fc.record({
  kind: fc.constantFrom('set', 'set', 'scale', 'scale', 'scale', 'delete', 'add'),
  pick: fc.nat(),
  factor: fc.constantFrom(2, 3, 10, 1000, 1e6, 1e9),
  value: hostileValue,
  key: fc.constantFrom('n_layer', 'num_hidden_layers', 'hidden_size', 'vocab_size', 'grad_accumulation_steps', 'memory_limit_bytes', 'count', 'batchsize', 'layers', 'type', 'x', 'steps', 'seq_len', 'head_dim', 'sliding_window', 'use_sliding_window', 'architectures', 'max_position_embeddings'),
});

/** The value with the mutations applied (a deep copy: the input is not changed). */
export function mutate(value: unknown, mutations: readonly Mutation[]): unknown {
  const root = structuredClone(value) as Record<string, unknown>;
  for (const m of mutations) {
    const paths = pathsOf(root).filter((p) => p.length > 0);
    if (paths.length === 0) break;
    const path = paths[m.pick % paths.length]!;
    let parent: unknown = root;
    for (const key of path.slice(0, -1)) parent = (parent as Record<string | number, unknown>)[key];
    const last = path[path.length - 1]!;
    const p = parent as Record<string | number, unknown>;
    if (m.kind === 'set') p[last] = structuredClone(m.value);
    else if (m.kind === 'scale') {
      // a number made larger (a valid plan that asks more: the limits, out of memory), other values left alone
      if (typeof p[last] === 'number' && Number.isInteger(p[last])) p[last] = (p[last] as number) * m.factor;
    }
    else if (m.kind === 'delete') {
      if (Array.isArray(p) && typeof last === 'number') p.splice(last, 1);
      else delete p[last];
    } else {
      const target = p[last];
      if (typeof target === 'object' && target !== null && !Array.isArray(target)) (target as Record<string, unknown>)[m.key] = structuredClone(m.value);
      else p[last] = structuredClone(m.value);
    }
  }
  return root;
}

/** Every number in a result is finite (typed arrays included). */
export function expectFinite(value: unknown, path = 'result'): void {
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Error(`${path} is ${value}`);
  } else if (ArrayBuffer.isView(value) && !(value instanceof DataView)) {
    const a = value as unknown as ArrayLike<number>;
    for (let i = 0; i < a.length; i++) if (!Number.isFinite(a[i])) throw new Error(`${path}[${i}] is ${a[i]}`);
  } else if (Array.isArray(value)) value.forEach((v, i) => expectFinite(v, `${path}[${i}]`));
  else if (typeof value === 'object' && value !== null) for (const [k, v] of Object.entries(value)) expectFinite(v, `${path}.${k}`);
}

/** Tallies of how inputs ended, for the line each test prints. */
export class Outcomes {
  readonly counts = new Map<string, number>();
  inputs = 0;
  slowestMs = 0;
  add(kind: string, ms: number): void {
    this.inputs++;
    this.counts.set(kind, (this.counts.get(kind) ?? 0) + 1);
    this.slowestMs = Math.max(this.slowestMs, ms);
  }
  toString(): string {
    return `${this.inputs} inputs (${[...this.counts].map(([k, n]) => `${n} ${k}`).join(', ')}), slowest ${Math.round(this.slowestMs)} ms`;
  }
}

/** One request's answers end in a valid result or a clear error: never `internal`, never a plan issue without words. */
export function expectClearEnding(answers: readonly EngineAnswer[], input: unknown): string {
  const last = answers[answers.length - 1];
  const context = () => JSON.stringify(input).slice(0, 600);
  if (!last) throw new Error(`no answer for ${context()}`);
  if (last.kind === 'error') {
    expect(last.internal, `internal error "${last.message}" for ${context()}`).not.toBe(true);
    expect(last.message.length).toBeGreaterThan(5);
  }
  if (last.kind === 'invalid_plan') {
    expect(last.issues.length).toBeGreaterThan(0);
    for (const i of last.issues) expect(i.message.length, `an issue without words at ${i.path}`).toBeGreaterThan(5);
  }
  if (last.kind === 'simulate_result' || last.kind === 'max_batch_result' || last.kind === 'replay_result') expectFinite(last.result);
  return last.kind;
}
