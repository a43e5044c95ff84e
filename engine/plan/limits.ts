/**
 * How much a plan asks of the simulator, and the limits it must stay under. Checked when the plan is read
 * (safeParsePlan), before anything runs: a plan too large to simulate is an issue at the field that makes it so
 * ("too large to simulate: ..."), never a hang, an exhausted heap or a number past 2^53.
 *
 * The simulator's cost is its allocator events (an allocation, a free, a segment mapped: one entry of a PyTorch
 * memory snapshot's trace): about a microsecond each, and the autograd graph of one micro-step is held in memory
 * while it runs (about 0.8 KB per event of that micro-step). Measured on this repository's CI machine (Node 24):
 * 0.75-1.3 million events a second; a list of 100,000 ReLU layers holds 480 MB of heap during its backward.
 * `estimateWork` predicts the events from the model's structure with per-layer costs measured from the simulator
 * itself (the largest over precisions and checkpointing modes); test/engine/plan/limits.test.ts keeps each
 * estimate between the events simulated and a few times more, so a change to an op that breaks it fails there.
 *
 * Why each limit (docs/engine.md "Limits"):
 * - `layers`: the model is built before it runs; 100,000 is some 800 times the deepest model trained
 *   (Llama 3.1 405B has 126 blocks) and keeps one micro-step's graph under ~0.5 GB.
 * - `parameters`: 10^13 (25 times a 405B model); every byte count of the model, its gradients and optimizer
 *   state then stays an exact integer (< 2^53).
 * - `tensors`: parameter and buffer tensors; each is allocated, gets a gradient and optimizer state.
 * - `micro_steps`: gradient accumulation steps per optimizer step. The peak does not change past the second
 *   micro-step (the first creates the gradients, every later one repeats the second: checked in limits.test.ts).
 * - `events_per_micro_step` bounds the heap (one micro-step's graph), `events` the time (about 10 s).
 * - `bytes`: a memory cap (gpu.memory_limit_bytes) of at most 1 PiB, so reserved and allocated bytes stay exact.
 */
import { InputError } from '../errors.ts';
import type { HfConfig } from '../models/hf/config.ts';
import { hfModel } from '../models/hf/index.ts';
import { fineTuningOf } from '../models/peft/lora.ts';
import { torchvisionModel } from '../models/torchvision.ts';
import { PRESETS } from '../models/presets.ts';
import type { ParameterSpec } from '../models/model.ts';
import type { Issue } from '../result/common.ts';
import type { LayerSpec, Plan } from './schema.ts';

export const LIMITS = {
  /** Layers of a layer list (a repeat's body counted `count` times), blocks of a config.json. */
  layers: 100_000,
  /** Parameter elements (model.parameter_count). */
  parameters: 10_000_000_000_000,
  /** Parameter and buffer tensors. */
  tensors: 1_000_000,
  /** training.grad_accumulation_steps. */
  micro_steps: 10_000,
  /** Allocator events of one micro-step (forward, loss, backward): the autograd graph held at once. */
  events_per_micro_step: 1_000_000,
  /** Allocator events of one simulation (loading, every step's micro-steps and optimizer step). */
  events: 10_000_000,
  /** A memory cap, 1 PiB (2^50 bytes). */
  bytes: 2 ** 50,
} as const;

/**
 * The smallest memory cap that lets anything be allocated: a small-pool segment, 2 MiB (kSmallBuffer in
 * CUDACachingAllocator.cpp). A cap below it runs out of memory on the first tensor.
 */
export const MIN_MEMORY_LIMIT_BYTES = 2_097_152;

/** How every limit's message begins. */
const TOO_LARGE = 'too large to simulate:';

/** What simulating a plan implies, estimated from its structure. */
export interface PlanWork {
  /** Layers (layer list, repeats expanded) or blocks (config.json); torchvision models count their blocks. */
  layers: number;
  /** The plan field that sets `layers`. */
  layers_field: string;
  parameters: number;
  /** The plan field that sets most of `parameters` (a config.json's vocab_size where the embeddings dominate). */
  parameters_field: string;
  /** Where one block of a config.json alone holds more than the parameter limit: the field that makes it so. */
  block_cause?: BlockCause;
  /** Parameter and buffer tensors. */
  tensors: number;
  micro_steps: number;
  /** Steps the estimate assumes: the plan's steps, at least 2, and one more to see the allocator's state repeat. */
  steps: number;
  events_per_micro_step: number;
  events: number;
}

// Allocator events of one micro-step for each layer type, measured from the simulator (two layer lists that differ
// by four such layers): `PLAIN` the most of fp32, bf16 and fp16 without checkpointing; `MOST` the most of every
// precision (autocast adds casts) and checkpointing mode (recomputation).
type LayerEvents = Record<LayerSpec['type'], number>;
const PLAIN_LAYER_EVENTS: LayerEvents = {
  linear: 12,
  conv2d: 21,
  batch_norm2d: 18,
  layer_norm: 18,
  rms_norm: 12,
  relu: 6,
  gelu: 6,
  silu: 6,
  tanh: 6,
  sigmoid: 6,
  dropout: 9,
  max_pool2d: 9,
  adaptive_avg_pool2d: 9,
  flatten: 6,
  embedding: 48,
  self_attention: 96,
  residual: 3, // the add
  repeat: 0,
};
const MOST_LAYER_EVENTS: LayerEvents = {
  linear: 42,
  conv2d: 54,
  batch_norm2d: 36,
  layer_norm: 48,
  rms_norm: 96,
  relu: 18,
  gelu: 18,
  silu: 18,
  tanh: 18,
  sigmoid: 18,
  dropout: 24,
  max_pool2d: 24,
  adaptive_avg_pool2d: 24,
  flatten: 6,
  embedding: 48,
  self_attention: 141,
  residual: 24, // the add, and a checkpoint's own tensors
  repeat: 24, // per body: a checkpoint's own tensors
};
/** Events of one micro-step outside the layers: inputs, loss, the loss's division and gradient. */
const MICRO_STEP_BASE_EVENTS = 100;
/** A Hugging Face model's own per micro-step beyond its blocks: embeddings, final norm, head, loss. */
const HF_HEAD_EVENTS = 150;
/** Per Hugging Face block and micro-step (the most of every precision, attention and checkpointing mode). */
const HF_BLOCK_EVENTS: Record<HfConfig['family'], number> = { gpt2: 480, llama: 660, gemma: 1000, bert: 480 };
/**
 * The blocks that do more than their family's: Qwen3's per-head q/k norms, Phi-3's slices, cat and chunk, Gemma 3's
 * q/k norms (six fp32 RMSNorms a block) and its rotary embedding computed once per layer (the most of every mode;
 * Gemma 2 at most 860 and Gemma 3 at most 1,050 a block measured from the simulator, AMP eager reentrant), Mixtral's
 * mixture of experts (router, sort, gathers, two grouped GEMMs, index_put_ scratch in backward: at most 850 a block
 * measured, AMP eager reentrant; the same whatever the expert count, grouped_mm allocating per call, not per expert),
 * and Qwen3-MoE's, Mixtral's block with Qwen3's q/k norms (counted per step from the simulator as 4 layers against 8
 * over every precision, attention and checkpointing mode: at most 745 a block, AMP eager reentrant, where Mixtral's
 * count the same way is 603: Mixtral's 1,000 scaled), and OLMo 2's (norms after attention and the MLP, q/k norms
 * over the projections, the rotary embedding in fp32: at most 599 a block counted the same way, Qwen3's 585: Qwen3's
 * 920 scaled).
 */
const VARIANT_BLOCK_EVENTS: Partial<Record<string, number>> = { qwen3: 920, phi3: 1010, gemma3_text: 1250, mixtral: 1000, qwen3_moe: 1250, olmo2: 950 };
/**
 * Per LoRA-adapted module and micro-step: the adapter path (cast, dropout, lora_A, lora_B, scaling, the sum and its
 * cast) and its backward, less the frozen base's weight gradient (counted per step from the simulator, LoRA on every
 * linear of GPT-2 and Llama against none, over every precision, attention, checkpointing mode and dropout: at most 54).
 */
const LORA_MODULE_EVENTS = 60;
/**
 * Per DoRA-adapted module and micro-step: LoRA's, and DoRA's own (the adapter's product from torch.eye, the weight's
 * norm, the DoRA terms, the base output again with a dropout, and their backward): counted per step from the
 * simulator, DoRA on every linear of Llama against LoRA, over fp32, bf16 and autocast, every checkpointing mode and
 * dropout 0 and 0.1: at most 151 more.
 */
const DORA_MODULE_EVENTS = 220;
/** Per torchvision model and micro-step (the most of every precision and checkpointing mode, at 224 px). */
const TORCHVISION_EVENTS: Record<string, number> = { resnet18: 1400, resnet34: 2600, resnet50: 3400, resnet101: 6400, resnet152: 9500, vit_b_16: 4100, vit_l_16: 8000 };
const TORCHVISION_BLOCKS: Record<string, number> = { resnet18: 8, resnet34: 16, resnet50: 16, resnet101: 33, resnet152: 50, vit_b_16: 12, vit_l_16: 24 };
/** Per parameter tensor: its load (1 to 2 events) and, each step, its optimizer update and zero_grad (up to 8). */
const LOAD_EVENTS_PER_TENSOR = 3;
const STEP_EVENTS_PER_TENSOR = 10;

interface Count {
  layers: number;
  events: number;
  parameters: number;
  tensors: number;
}

/** The part of a block that holds most of its parameters, and the config.json field that sizes that part. */
export interface BlockCause {
  field: string;
  value: number;
  piece: BlockPiece;
  /** Parameters of one block (the mean over the blocks), and of the piece in it. */
  block_parameters: number;
  piece_parameters: number;
}

/** The parts of a transformer block: attention (q, k, v, o), the dense MLP, the routed experts with their router. */
type BlockPiece = 'attention' | 'MLP' | 'experts';

/** A block's parameter, by its name in named_parameters(): in block N of `layers.N`, `h.N` (GPT-2), `layer.N` (BERT). */
const IN_BLOCK = /\.(?:layers|h|layer)\.\d+\./;

function blockPiece(name: string): BlockPiece | null {
  if (/\.experts\.|\.mlp\.gate\.weight$/.test(name)) return 'experts';
  // BERT's MLP: intermediate.dense and the layer's own output.dense (attention.output.dense is attention's)
  if (/\.mlp\.|\.intermediate\.|\.layer\.\d+\.output\.dense\./.test(name)) return 'MLP';
  if (/attn|attention/.test(name)) return 'attention';
  return null; // the norms
}

/**
 * Which field makes one block too large, from the block's parameter count: hidden_size^2 times each piece's own
 * factor (attention: none beyond hidden_size; the MLP: intermediate_size / hidden_size; the experts: their number
 * times their width / hidden_size). The piece that holds most of the block is the cause; its field is the factor
 * it multiplies by (hidden_size for attention, intermediate_size (GPT-2's n_inner, n_embd where n_inner is unset
 * and so 4 x n_embd) for the MLP, and for the experts their number or their width, whichever is the larger factor).
 */
function blockCause(hf: HfConfig, raw: Record<string, unknown>, parameters: readonly ParameterSpec[]): BlockCause {
  const pieces: Record<BlockPiece, number> = { attention: 0, MLP: 0, experts: 0 };
  let inBlocks = 0;
  for (const p of parameters) {
    if (p.buffer || !IN_BLOCK.test(p.name)) continue;
    const n = p.shape.reduce((a, b) => a * b, 1);
    inBlocks += n;
    const piece = blockPiece(p.name);
    if (piece) pieces[piece] += n;
  }
  const layers = Math.max(1, hf.layers);
  const piece = (Object.keys(pieces) as BlockPiece[]).reduce((a, b) => (pieces[b] > pieces[a] ? b : a));
  const hidden = hf.family === 'gpt2' ? 'n_embd' : 'hidden_size';
  const cause = (field: string, value: number): BlockCause => ({ field, value, piece, block_parameters: inBlocks / layers, piece_parameters: pieces[piece] / layers });
  if (piece === 'MLP') {
    if (hf.family !== 'gpt2') return cause('intermediate_size', hf.intermediate);
    return raw['n_inner'] == null ? cause(hidden, hf.hidden) : cause('n_inner', hf.inner);
  }
  if (piece === 'experts' && hf.family === 'llama' && hf.moe) {
    const moe = hf.moe;
    const [count, width] = moe.kind === 'mixtral' ? ['num_local_experts', 'intermediate_size'] : ['num_experts', 'moe_intermediate_size'];
    return moe.experts >= moe.intermediate / hf.hidden ? cause(count, moe.experts) : cause(width, moe.intermediate);
  }
  return cause(hidden, hf.hidden);
}

/** One layer spec's count (a repeat multiplies its body: saturating at Infinity, never walking the copies). */
function countLayer(l: LayerSpec, costs: LayerEvents): Count {
  const params = (shapes: number[][]): Count => ({
    layers: 1,
    events: costs[l.type],
    parameters: shapes.reduce((n, s) => n + s.reduce((a, b) => a * b, 1), 0),
    tensors: shapes.length,
  });
  switch (l.type) {
    case 'linear':
      return params(l.bias === false ? [[l.out_features, l.in_features]] : [[l.out_features, l.in_features], [l.out_features]]);
    case 'conv2d': {
      const w = [l.out_channels, l.in_channels, l.kernel_size, l.kernel_size];
      return params(l.bias === false ? [w] : [w, [l.out_channels]]);
    }
    case 'batch_norm2d': // weight, bias; running_mean, running_var, num_batches_tracked are buffers
      return { ...params([[l.num_features], [l.num_features]]), tensors: 5 };
    case 'layer_norm':
      return params([[l.normalized_shape], [l.normalized_shape]]);
    case 'rms_norm':
      return params([[l.normalized_shape]]);
    case 'embedding':
      return params([[l.num_embeddings, l.embedding_dim]]);
    case 'self_attention':
      return params([[3 * l.embed_dim, l.embed_dim], [3 * l.embed_dim], [l.embed_dim, l.embed_dim], [l.embed_dim]]);
    case 'residual': {
      const body = countLayers(l.layers, costs);
      return { ...body, events: body.events + costs.residual };
    }
    case 'repeat': {
      const body = countLayers(l.layers, costs);
      return { layers: l.count * body.layers, events: l.count * (body.events + costs.repeat), parameters: l.count * body.parameters, tensors: l.count * body.tensors };
    }
    default:
      return params([]);
  }
}

function countLayers(layers: readonly LayerSpec[], costs: LayerEvents): Count {
  const total: Count = { layers: 0, events: 0, parameters: 0, tensors: 0 };
  for (const l of layers) {
    const c = countLayer(l, costs);
    total.layers += c.layers;
    total.events += c.events;
    total.parameters += c.parameters;
    total.tensors += c.tensors;
  }
  return total;
}

function countSpecs(specs: readonly ParameterSpec[]): { parameters: number; tensors: number } {
  let parameters = 0;
  for (const p of specs) if (!p.buffer) parameters += p.shape.reduce((a, b) => a * b, 1);
  return { parameters, tensors: specs.length };
}

/**
 * Layers in a plan as given (before the schema reads it): the JSON nodes under `model.layers`, repeats not
 * expanded, so a list too long to be worth validating is refused in time proportional to its length only.
 */
export function rawLayerCount(value: unknown): number {
  const model = typeof value === 'object' && value !== null ? (value as { model?: unknown }).model : undefined;
  const layers = typeof model === 'object' && model !== null ? (model as { layers?: unknown }).layers : undefined;
  let count = 0;
  const stack: unknown[] = [layers];
  while (stack.length && count <= LIMITS.layers) {
    const list = stack.pop();
    if (!Array.isArray(list)) continue;
    count += list.length;
    for (const l of list) if (typeof l === 'object' && l !== null && 'layers' in l) stack.push((l as { layers: unknown }).layers);
  }
  return count;
}

/** A plan whose layer list is too long to read, as its one issue. */
export function rawLayerIssue(value: unknown): Issue | null {
  const count = rawLayerCount(value);
  return count > LIMITS.layers ? { path: 'model.layers', message: `${TOO_LARGE} more than ${amount(LIMITS.layers)} layers; the limit is ${amount(LIMITS.layers)} (the model is built and its graph held in memory)` } : null;
}

/** The plan's model counted: from the layer list itself, or from the model built (its parameter list only). */
function countModel(plan: Plan, hf: HfConfig | null): Count & { layers_field: string; parameters_field?: string; block_cause?: BlockCause } {
  const m = plan.model;
  const t = plan.training;
  const device = { computeCapability: [9, 0] as [number, number] };
  if ('layers' in m) {
    const plain = !t.precision.startsWith('amp') && t.activation_checkpointing === false;
    return { ...countLayers(m.layers, plain ? PLAIN_LAYER_EVENTS : MOST_LAYER_EVENTS), layers_field: 'model.layers' };
  }
  if (hf) {
    const layersField = 'preset' in m ? 'model.preset' : `model.hf_config.${hf.family === 'gpt2' ? 'n_layer' : 'num_hidden_layers'}`;
    const perBlock = VARIANT_BLOCK_EVENTS[hf.modelType] ?? HF_BLOCK_EVENTS[hf.family];
    const events = hf.layers * perBlock + HF_HEAD_EVENTS;
    // Build the parameter list only when the blocks are few enough to list (the events limit below refuses more).
    if (hf.layers > LIMITS.layers || events > LIMITS.events_per_micro_step) return { layers: hf.layers, events, parameters: 0, tensors: 0, layers_field: layersField };
    const model = hfModel(hf, { dtype: 'float32', seqLen: t.seq_len, attention: t.attention, checkpointing: t.activation_checkpointing, device, tuning: fineTuningOf(t) });
    const counted = countSpecs(model.parameters);
    // a module each lora_A (DoRA's adds a magnitude)
    const adapted = model.parameters.filter((p) => p.adapter && p.name.endsWith('.lora_A.default.weight')).length;
    const moduleEvents = t.lora?.use_dora ? DORA_MODULE_EVENTS : LORA_MODULE_EVENTS;
    // the parameters' field: the vocabulary's where the embeddings hold most of them (a vocab_size too large), the
    // field that makes one block too large where one block alone is past the limit (blockCause), else the number
    // of blocks
    const embeddings = model.parameters.filter((p) => !p.buffer && /embed_tokens|wte|word_embeddings|lm_head/.test(p.name)).reduce((n, p) => n + p.shape.reduce((a, b) => a * b, 1), 0);
    if (!('hf_config' in m)) return { layers: hf.layers, events: events + adapted * moduleEvents, ...counted, layers_field: layersField };
    const byVocabulary = embeddings > counted.parameters / 2;
    const cause = byVocabulary || counted.parameters <= LIMITS.parameters ? null : blockCause(hf, m.hf_config, model.parameters);
    const tooWide = cause !== null && cause.block_parameters > LIMITS.parameters;
    const parametersField = byVocabulary ? 'model.hf_config.vocab_size' : tooWide ? `model.hf_config.${cause.field}` : layersField;
    return { layers: hf.layers, events: events + adapted * moduleEvents, ...counted, layers_field: layersField, parameters_field: parametersField, ...(tooWide ? { block_cause: cause } : {}) };
  }
  if ('hf_config' in m) throw new Error('a config.json model is counted from its resolved config');
  const preset = 'preset' in m ? PRESETS[m.preset] : undefined;
  const name = 'torchvision' in m ? m.torchvision : preset?.kind === 'torchvision' ? preset.name : '';
  const numClasses = 'torchvision' in m ? m.num_classes : (m.num_classes ?? 1000);
  const model = torchvisionModel(name, { dtype: 'float32', imageSize: t.image_size, numClasses, checkpointing: t.activation_checkpointing, convWorkspaces: null, device });
  return { layers: TORCHVISION_BLOCKS[name] ?? 0, events: TORCHVISION_EVENTS[name] ?? 0, ...countSpecs(model.parameters), layers_field: 'preset' in m ? 'model.preset' : 'model.torchvision' };
}

/**
 * The work simulating the plan implies. `hf` is the plan's resolved config.json (a preset's or the pasted one),
 * null for other models. Estimates only: the limits compare against them.
 */
export function estimateWork(plan: Plan, hf: HfConfig | null): PlanWork {
  const t = plan.training;
  const c = countModel(plan, hf);
  const eventsPerMicroStep = c.events + MICRO_STEP_BASE_EVENTS;
  const steps = Math.max(t.steps, 2) + 1;
  const events = c.tensors * LOAD_EVENTS_PER_TENSOR + steps * (t.grad_accumulation_steps * eventsPerMicroStep + c.tensors * STEP_EVENTS_PER_TENSOR);
  return {
    layers: c.layers,
    layers_field: c.layers_field,
    parameters: c.parameters,
    parameters_field: c.parameters_field ?? c.layers_field,
    ...(c.block_cause ? { block_cause: c.block_cause } : {}),
    tensors: c.tensors,
    micro_steps: t.grad_accumulation_steps,
    steps,
    events_per_micro_step: eventsPerMicroStep,
    events,
  };
}

/** A count for a message: `1,000,000`, or "more than 10^15" where a repeat of repeats went past exact numbers. */
function amount(n: number): string {
  return n > 1e15 ? 'more than 10^15' : Math.round(n).toLocaleString('en-US');
}

function bytesText(n: number): string {
  const units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${n} bytes` : `${Number.isInteger(v) ? v : v.toFixed(2)} ${units[u]}`;
}


/**
 * The cap's own problems: under the smallest segment (a unit slip: 80 meant 80 GB) or over the 1 PiB limit.
 * `where` is the field or flag that gave it.
 */
export function memoryLimitIssue(limitBytes: number, where = 'gpu.memory_limit_bytes'): Issue | null {
  if (limitBytes < MIN_MEMORY_LIMIT_BYTES) {
    const guesses = [
      [1e9, 'GB'],
      [2 ** 30, 'GiB'],
      [1e6, 'MB'],
      [2 ** 20, 'MiB'],
    ] as const;
    const meant = guesses
      .filter(([scale]) => limitBytes * scale >= MIN_MEMORY_LIMIT_BYTES && limitBytes * scale <= LIMITS.bytes)
      .slice(0, 2)
      .map(([scale, unit]) => `${limitBytes} ${unit} (${limitBytes * scale})`);
    return {
      path: where,
      message:
        `${limitBytes} bytes is less than the smallest segment PyTorch's allocator reserves (2 MiB), so every allocation would run out of memory; the cap is in bytes` +
        (meant.length ? `: did you mean ${meant.join(' or ')}?` : ''),
    };
  }
  if (limitBytes > LIMITS.bytes) {
    return { path: where, message: `${TOO_LARGE} a cap of ${limitBytes} bytes (${bytesText(limitBytes)}); the limit is ${bytesText(LIMITS.bytes)} (2^50 bytes), where every byte count stays an exact integer` };
  }
  return null;
}

/**
 * Every limit the plan goes past, each at the field that makes it so; also a model with nothing to train (a layer
 * list without parameters: PyTorch's `loss.backward()` raises "element 0 of tensors does not require grad").
 */
export function limitIssues(plan: Plan, hf: HfConfig | null): Issue[] {
  const issues: Issue[] = [];
  const t = plan.training;
  const gpu = plan.gpu;
  if (gpu && 'memory_limit_bytes' in gpu) {
    const issue = memoryLimitIssue(gpu.memory_limit_bytes);
    if (issue) issues.push(issue);
  }
  if (t.grad_accumulation_steps > LIMITS.micro_steps) {
    issues.push({
      path: 'training.grad_accumulation_steps',
      message: `${TOO_LARGE} ${amount(t.grad_accumulation_steps)} micro-steps per optimizer step; the limit is ${amount(LIMITS.micro_steps)}. The peak does not change past the second micro-step: plan with 2 to see it`,
    });
    return issues;
  }
  let work: PlanWork;
  try {
    work = estimateWork(plan, hf);
  } catch (error) {
    if (error instanceof InputError) return [...issues, { path: error.where, message: error.problem }];
    throw error;
  }
  const layersWhat = work.layers_field === 'model.layers' ? 'layers' : 'blocks';
  if (work.layers > LIMITS.layers) {
    issues.push({ path: work.layers_field, message: `${TOO_LARGE} ${amount(work.layers)} ${layersWhat}; the limit is ${amount(LIMITS.layers)} (the model is built and its graph held in memory)` });
    return issues;
  }
  if (work.events_per_micro_step > LIMITS.events_per_micro_step) {
    issues.push({
      path: work.layers_field,
      message: `${TOO_LARGE} one micro-step of ${amount(work.layers)} ${layersWhat} makes about ${amount(work.events_per_micro_step)} allocator events; the limit is ${amount(LIMITS.events_per_micro_step)} (its autograd graph is held in memory)`,
    });
    return issues;
  }
  const cause = work.block_cause;
  if (cause) {
    issues.push({
      path: work.parameters_field,
      message: `${TOO_LARGE} ${cause.field} ${amount(cause.value)} makes one block alone hold ${amount(cause.block_parameters)} parameters (${amount(cause.piece_parameters)} of them in its ${cause.piece}); the limit is ${amount(LIMITS.parameters)} (10^13) for the whole model, where every byte count stays exact`,
    });
  } else if (work.parameters > LIMITS.parameters) {
    issues.push({ path: work.parameters_field, message: `${TOO_LARGE} ${amount(work.parameters)} parameters; the limit is ${amount(LIMITS.parameters)} (10^13), where every byte count stays exact` });
  }
  if (work.tensors > LIMITS.tensors) {
    issues.push({ path: work.layers_field, message: `${TOO_LARGE} ${amount(work.tensors)} parameter and buffer tensors; the limit is ${amount(LIMITS.tensors)}` });
  }
  if (work.events > LIMITS.events) {
    const byAccumulation = work.micro_steps > 1;
    issues.push({
      path: byAccumulation ? 'training.grad_accumulation_steps' : t.steps > 3 ? 'training.steps' : work.layers_field,
      message:
        `${TOO_LARGE} ${work.steps} steps x ${amount(work.micro_steps)} micro-step${work.micro_steps > 1 ? 's' : ''} x about ${amount(work.events_per_micro_step)} allocator events each = about ${amount(work.events)} events; the limit is ${amount(LIMITS.events)} (about 10 s)` +
        (byAccumulation ? '. The peak does not change past the second micro-step: plan with 2 to see it' : ''),
    });
  }
  if (work.tensors === 0 && 'layers' in plan.model) {
    issues.push({ path: 'model.layers', message: 'no layer has parameters, so there is nothing to train: loss.backward() would raise "element 0 of tensors does not require grad" (add a linear, conv2d, norm or embedding layer)' });
  }
  return issues;
}
