/**
 * The engine's problems in the Chinese interface (renderer/src/i18n/issues.ts): every message shape the plan
 * schema, a config.json, LoRA and freezing, sliding-window attention and the simulator's limits produce, made by
 * the engine itself, reads as Chinese with its names, numbers and quoted values kept; English stays as it is.
 */
import { describe, expect, it } from 'vitest';
import { catalogues } from '../../renderer/src/i18n/index.ts';
import { localizeEngineMessage, localizeIssue } from '../../renderer/src/i18n/issues.ts';
import { InputError } from '../../engine/errors.ts';
import { markFrozen } from '../../engine/models/peft/lora.ts';
import { parsePlan, safeParsePlan } from '../../engine/plan/parse.ts';
import { simulate } from '../../engine/train/simulate.ts';
import { gpuCatalog, planGpu } from '../../cli/gpus.ts';

const plan = (model: unknown, training: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) => ({
  format: 'memplan.plan',
  version: 1,
  model,
  training: { batch_size: 2, seq_len: 64, ...training },
  ...extra,
});
const llama = { model_type: 'llama', hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 1000 };
const mistral = { model_type: 'mistral', hidden_size: 512, intermediate_size: 1024, num_hidden_layers: 2, num_attention_heads: 8, num_key_value_heads: 4, vocab_size: 1000, sliding_window: 128 };
const lora = { r: 8, alpha: 16, target_modules: ['q_proj', 'v_proj'] };

/** The message of the one issue the plan has at `path` (safeParsePlan: the schema, a config.json, the limits). */
function issue(value: unknown, path: string): string {
  const r = safeParsePlan(value, { catalog: gpuCatalog() });
  if (r.ok) throw new Error(`expected an issue at ${path}`);
  const found = r.issues.find((i) => i.path === path);
  if (!found) throw new Error(`no issue at ${path}: ${r.issues.map((i) => `${i.path}: ${i.message}`).join('\n')}`);
  return found.message;
}

/** What the simulator refuses the plan with (an InputError's problem). */
function refusal(value: unknown): string {
  try {
    const p = parsePlan(value);
    simulate(p, { device: planGpu(p), untilSteady: false, timelinePoints: 0 });
  } catch (error) {
    if (error instanceof InputError) return error.problem;
    throw error;
  }
  throw new Error('expected a refusal');
}

const hf = (config: Record<string, unknown>, field: string) => issue(plan({ hf_config: config }), `model.hf_config.${field}`);
const loraField = (spec: Record<string, unknown>, field: string) => issue(plan({ preset: 'gpt2' }, { lora: { ...lora, ...spec } }), `training.lora.${field}`);

const cases: [string, string][] = [
  // the plan schema
  ['activation_checkpointing, a misspelt mode', issue(plan({ preset: 'gpt2' }, { activation_checkpointing: 'reentrnat' }), 'training.activation_checkpointing')],
  ['lora.r, a fraction', loraField({ r: 1.5 }, 'r')],
  ['lora.r, zero', loraField({ r: 0 }, 'r')],
  ['lora.r, missing', issue(plan({ preset: 'gpt2' }, { lora: { alpha: 8, target_modules: ['q_proj'] } }), 'training.lora.r')],
  ['lora.alpha, zero', loraField({ alpha: 0 }, 'alpha')],
  ['lora.alpha, text', loraField({ alpha: '8' }, 'alpha')],
  ['lora.dropout, 1.5', loraField({ dropout: 1.5 }, 'dropout')],
  ['lora.dropout, negative', loraField({ dropout: -0.1 }, 'dropout')],
  ['lora.target_modules, an empty name', loraField({ target_modules: [''] }, 'target_modules[0]')],
  ['lora.target_modules, none', loraField({ target_modules: [] }, 'target_modules')],
  ['lora.target_modules, a number', loraField({ target_modules: 5 }, 'target_modules')],
  ['lora.target_modules, "all-linear" in a list', loraField({ target_modules: ['all-linear'] }, 'target_modules[0]')],
  ['lora.target_modules, a pattern JavaScript cannot read', loraField({ target_modules: '(?P<x>q_proj)' }, 'target_modules')],
  ['lora.quantization, a typo', loraField({ quantization: '2bit' }, 'quantization')],
  ['lora.quantization, far off', loraField({ quantization: 'nf4' }, 'quantization')],
  ['lora, an unknown key', loraField({ rank: 8 }, 'rank')],
  ['freeze, an empty pattern', issue(plan({ preset: 'gpt2' }, { freeze: [''] }), 'training.freeze[0]')],
  ['two model forms at once', issue({ ...plan({ preset: 'gpt2' }), model: { preset: 'gpt2', hf_config: { model_type: 'llama' } } }, 'model.hf_config')],
  ['steps over 20', issue(plan({ preset: 'gpt2' }, { steps: 50 }), 'training.steps')],
  ['an unknown layer type', issue(plan({ input_features: 8, layers: [{ type: 'linaer', in_features: 8, out_features: 8 }] }), 'model.layers[0].type')],
  ['no layers', issue(plan({ input_features: 8, layers: [] }), 'model.layers')],
  ['a format', issue({ ...plan({ preset: 'gpt2' }), format: 'plan' }, 'format')],
  ['a config.json instead of a plan', issue(llama, '')],
  // a config.json
  ['quantization_config', hf({ ...llama, quantization_config: { load_in_4bit: true } }, 'quantization_config')],
  ['model_type missing', hf({ hidden_size: 64 }, 'model_type')],
  ['model_type not simulated', hf({ model_type: 'falcon' }, 'model_type')],
  ['gemma3, the multimodal model', hf({ model_type: 'gemma3' }, 'model_type')],
  ['EmbeddingGemma', hf({ model_type: 'gemma3_text', use_bidirectional_attention: true }, 'use_bidirectional_attention')],
  ['architectures, not a list', hf({ ...llama, architectures: 'LlamaForCausalLM' }, 'architectures')],
  ['architectures, another head', hf({ ...llama, architectures: ['LlamaForQuestionAnswering'] }, 'architectures')],
  ['architectures, another head of BERT', hf({ model_type: 'bert', architectures: ['BertForQuestionAnswering'] }, 'architectures')],
  ['architectures, the bare model', hf({ model_type: 'bert', architectures: ['BertModel'] }, 'architectures')],
  ['architectures, BertForPreTraining', hf({ model_type: 'bert', architectures: ['BertForPreTraining'] }, 'architectures')],
  ['architectures, the bare model of a decoder', hf({ ...llama, architectures: ['LlamaModel'] }, 'architectures')],
  ['a problem_type transformers refuses', hf({ model_type: 'bert', architectures: ['BertForSequenceClassification'], problem_type: 'multi_label' }, 'problem_type')],
  ['a problem_type on a language model', hf({ ...llama, problem_type: 'classification' }, 'problem_type')],
  ['a regression on a bf16 model', issue(plan({ hf_config: { model_type: 'bert', architectures: ['BertForSequenceClassification'], num_labels: 1 } }, { precision: 'bf16' }), 'training.precision')],
  ['a regression on an fp16 model', issue(plan({ hf_config: { ...llama, architectures: ['LlamaForSequenceClassification'], pad_token_id: 0, num_labels: 1 } }, { precision: 'fp16' }), 'training.precision')],
  ['a sequence classifier naming no class', hf({ model_type: 'bert', architectures: ['BertForSequenceClassification'], id2label: {} }, 'id2label')],
  ["a decoder classifier without pad_token_id", hf({ ...llama, architectures: ['LlamaForSequenceClassification'] }, 'pad_token_id')],
  ["a decoder classifier's pad_token_id not a token id", hf({ ...llama, architectures: ['LlamaForSequenceClassification'], pad_token_id: 'x' }, 'pad_token_id')],
  ['RoBERTa with positions for its padding token alone', hf({ model_type: 'roberta', max_position_embeddings: 2 }, 'max_position_embeddings')],
  ['an activation not simulated', hf({ ...llama, hidden_act: 'tanh' }, 'hidden_act')],
  ['partial_rotary_factor out of range', hf({ model_type: 'phi3', hidden_size: 64, num_attention_heads: 4, partial_rotary_factor: 1.5 }, 'partial_rotary_factor')],
  ['partial_rotary_factor, odd dimensions', hf({ model_type: 'phi3', hidden_size: 64, num_attention_heads: 4, partial_rotary_factor: 0.2 }, 'partial_rotary_factor')],
  ['num_key_value_heads', hf({ ...llama, num_key_value_heads: 3 }, 'num_key_value_heads')],
  ['hidden_size under the heads', hf({ ...llama, hidden_size: 2, num_key_value_heads: 4 }, 'hidden_size')],
  ['hidden_size not divisible', hf({ model_type: 'bert', hidden_size: 100, num_attention_heads: 3 }, 'hidden_size')],
  ['head_dim odd', hf({ model_type: 'gemma2', head_dim: 33 }, 'head_dim')],
  ['layer_types', hf({ model_type: 'gemma2', num_hidden_layers: 3, layer_types: ['full_attention'] }, 'layer_types')],
  ['Mixtral output_router_logits', hf({ model_type: 'mixtral', output_router_logits: true }, 'output_router_logits')],
  ['Qwen3-MoE mlp_only_layers', hf({ model_type: 'qwen3_moe', mlp_only_layers: 'all' }, 'mlp_only_layers')],
  ['SmolLM3 no_rope_layers', hf({ model_type: 'smollm3', num_hidden_layers: 4, no_rope_layers: [1, 1] }, 'no_rope_layers')],
  ['SmolLM3 sliding window', hf({ model_type: 'smollm3', use_sliding_window: true, sliding_window: 4096 }, 'use_sliding_window')],
  ['Mixtral router_jitter_noise negative', hf({ model_type: 'mixtral', router_jitter_noise: -1 }, 'router_jitter_noise')],
  ['Mixtral router_jitter_noise', hf({ model_type: 'mixtral', router_jitter_noise: 0.01 }, 'router_jitter_noise')],
  ['Mixtral experts_implementation', hf({ model_type: 'mixtral', experts_implementation: 'eager' }, 'experts_implementation')],
  ['Mixtral num_experts_per_tok', hf({ model_type: 'mixtral', num_experts_per_tok: 9 }, 'num_experts_per_tok')],
  ['a probability', hf({ ...llama, attention_dropout: 2 }, 'attention_dropout')],
  ['true or false', hf({ ...llama, tie_word_embeddings: 'yes' }, 'tie_word_embeddings')],
  ['a positive number or null', hf({ model_type: 'gemma2', attn_logit_softcapping: -1 }, 'attn_logit_softcapping')],
  ['a positive integer', hf({ ...llama, hidden_size: 'x' }, 'hidden_size')],
  // no model_type's default is missing today: the message as resolveHfConfig's `int` words it
  ['required for this model_type', 'is required for this model_type'],
  ['seq_len over the positions', refusal(plan({ hf_config: llama }, { seq_len: 4096 }))],
  // LoRA and frozen parameters
  ['QLoRA, 4-bit', refusal(plan({ hf_config: llama }, { lora: { ...lora, quantization: '4bit' } }))],
  ['QLoRA, 8-bit', refusal(plan({ hf_config: llama }, { lora: { ...lora, quantization: '8bit' } }))],
  ['target_modules matching no nn.Linear', refusal(plan({ hf_config: llama }, { lora: { ...lora, target_modules: ['c_attn', 'qkv'] } }))],
  ['target_modules, a pattern taking an activation', refusal(plan({ hf_config: llama }, { lora: { ...lora, target_modules: 'model\\.layers\\.\\d+\\.mlp\\..*' } }))],
  ['lora.target_modules, a pattern that backtracks for exponential time', loraField({ target_modules: '(.*)*q_proj' }, 'target_modules')],
  ['target_modules, a pattern matching nothing', refusal(plan({ hf_config: llama }, { lora: { ...lora, target_modules: 'nothing.*' } }))],
  ['target_modules "all-linear" on a token classifier', refusal(plan({ hf_config: { ...llama, architectures: ['LlamaForTokenClassification'], num_labels: 3 } }, { lora: { ...lora, target_modules: 'all-linear' } }))],
  ["target_modules naming a token classifier's head", refusal(plan({ hf_config: { ...llama, architectures: ['LlamaForTokenClassification'], num_labels: 3 } }, { lora: { ...lora, target_modules: ['q_proj', 'score'] } }))],
  ['modules_to_save taking a module LoRA adapts', refusal(plan({ hf_config: llama }, { lora: { ...lora, modules_to_save: ['proj'] } }))],
  ['modules_to_save taking a block', refusal(plan({ hf_config: llama }, { lora: { ...lora, modules_to_save: ['layers.0'] } }))],
  ["modules_to_save on a masked LM's decoder", refusal(plan({ preset: 'bert-base' }, { lora: { r: 8, alpha: 16, target_modules: ['query', 'value'], modules_to_save: ['decoder'] } }))],
  ['modules_to_save taking a part of a LoRA layer', refusal(plan({ hf_config: llama }, { lora: { ...lora, modules_to_save: ['lora_A'] } }))],
  ["modules_to_save taking a module inside a classifier's head", refusal(plan({ hf_config: { model_type: 'roberta', architectures: ['RobertaForSequenceClassification'], hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, intermediate_size: 128, vocab_size: 1000, max_position_embeddings: 130 } }, { lora: { r: 8, alpha: 16, target_modules: ['query', 'value'], modules_to_save: ['out_proj'] } }))],
  ['lora.modules_to_save, a name PEFT cannot read as a pattern', loraField({ modules_to_save: ['lm_head('] }, 'modules_to_save[0]')],
  ['lora.modules_to_save, a name that backtracks', loraField({ modules_to_save: ['(.*)*head'] }, 'modules_to_save[0]')],
  ['target_modules all kept whole by modules_to_save', refusal(plan({ hf_config: llama }, { lora: { ...lora, target_modules: ['q_proj'], modules_to_save: ['q_proj'] } }))],
  ["use_dora on GPT-2's Conv1D", refusal(plan({ preset: 'gpt2' }, { lora: { r: 8, alpha: 16, target_modules: ['c_attn'], use_dora: true } }))],
  ['ensure_weight_tying on a masked LM', refusal(plan({ preset: 'roberta-base' }, { lora: { r: 8, alpha: 16, target_modules: ['query', 'value'], modules_to_save: ['lm_head'], ensure_weight_tying: true } }))],
  ['ensure_weight_tying with target_modules taking the embedding', refusal(plan({ preset: 'llama-3.2-1b' }, { lora: { r: 8, alpha: 16, target_modules: 'embed_tokens|.*q_proj', ensure_weight_tying: true } }))],
  ['lora.modules_to_save, an empty name', loraField({ modules_to_save: [''] }, 'modules_to_save[0]')],
  ['target_modules "all-linear" on a mixture of experts', refusal(plan({ hf_config: { ...llama, model_type: 'mixtral', num_local_experts: 4, num_experts_per_tok: 2 } }, { lora: { ...lora, target_modules: 'all-linear' } }))],
  ['target_modules naming the input embedding', refusal(plan({ hf_config: llama }, { lora: { ...lora, target_modules: ['q_proj', 'embed_tokens'] } }))],
  ['target_modules naming a tied LM head', refusal(plan({ hf_config: { model_type: 'gpt2', n_layer: 2, n_embd: 64, n_head: 4 } }, { lora: { ...lora, target_modules: ['c_attn', 'lm_head'] } }))],
  ["target_modules matching none of GPT-2's Conv1D", refusal(plan({ hf_config: { model_type: 'gpt2', n_layer: 2 } }, { lora: { ...lora, target_modules: ['q_proj'] } }))],
  ['LoRA on a model that is not a Hugging Face one', refusal(plan({ torchvision: 'resnet18', num_classes: 10 }, { lora: { ...lora, target_modules: ['fc'] } }))],
  ['target_modules matching no Linear module', markFrozen([], { lora: { ...lora, dropout: 0 }, freeze: [] }).error!],
  ['a freeze pattern matching nothing', refusal(plan({ hf_config: llama }, { freeze: ['layers.*'] }))],
  ['one pattern freezing everything', refusal(plan({ hf_config: llama }, { freeze: ['*'] }))],
  ['patterns freezing everything', refusal(plan({ hf_config: llama }, { freeze: ['model.*', 'lm_head.*'] }))],
  ['one pattern freezing every adapter', refusal(plan({ hf_config: llama }, { lora, freeze: ['*lora_*'] }))],
  ['patterns freezing every adapter', refusal(plan({ hf_config: llama }, { lora, freeze: ['*lora_A*', '*lora_B*'] }))],
  ['LoRA on GPT-2', refusal(plan({ hf_config: { model_type: 'gpt2', n_layer: 2, n_embd: 64, n_head: 4 } }, { lora }))],
  ["target_modules matching none of BERT's nn.Linear", refusal(plan({ hf_config: { model_type: 'bert', num_hidden_layers: 2, hidden_size: 64, num_attention_heads: 4 } }, { lora }))],
  // sliding-window attention
  ['the sliding window in fp32', refusal(plan({ hf_config: mistral }, { seq_len: 256, precision: 'fp32' }))],
  // the wording attention.ts had before, kept while it may come back
  ['eager sliding-window attention', refusal(plan({ hf_config: { ...mistral, model_type: 'qwen2', use_sliding_window: true } }, { seq_len: 256, precision: 'bf16', attention: 'eager' }))],
  // plans too large to simulate
  ['a billion micro-steps', issue(plan({ preset: 'gpt2' }, { grad_accumulation_steps: 1_000_000_000 }), 'training.grad_accumulation_steps')],
  ['events of accumulation', issue(plan({ preset: 'gpt2-xl' }, { grad_accumulation_steps: 5000 }), 'training.grad_accumulation_steps')],
  ['events of steps', issue(plan({ input_features: 8, layers: [{ type: 'repeat', count: 80_000, layers: [{ type: 'linear', in_features: 8, out_features: 8 }] }] }, { steps: 20 }), 'training.steps')],
  ['ten million blocks', hf({ model_type: 'gpt2', n_layer: 10_000_000 }, 'n_layer')],
  ['more than 10^15 layers', issue(plan({ input_features: 8, layers: [{ type: 'repeat', count: 1e9, layers: [{ type: 'repeat', count: 1e9, layers: [{ type: 'linear', in_features: 8, out_features: 8 }] }] }] }), 'model.layers')],
  ['a micro-step too large', hf({ model_type: 'llama', num_hidden_layers: 50_000, hidden_size: 64, num_attention_heads: 4, intermediate_size: 128 }, 'num_hidden_layers')],
  ['too many parameters', issue(plan({ input_features: 8, layers: [{ type: 'linear', in_features: 8, out_features: 8 }, { type: 'embedding', num_embeddings: 1e9, embedding_dim: 1e5 }] }), 'model.layers')],
  ['one block too large by its intermediate_size', hf({ ...llama, hidden_size: 4096, num_attention_heads: 32, intermediate_size: 1_100_800_000 }, 'intermediate_size')],
  ['one block too large by its hidden_size', hf({ ...llama, hidden_size: 4_096_000, num_attention_heads: 32, num_key_value_heads: 32 }, 'hidden_size')],
  ['one block too large by its experts', hf({ model_type: 'mixtral', num_hidden_layers: 2, num_local_experts: 100_000 }, 'num_local_experts')],
  // not reached by a plan (the layer limit comes first): the message as limitIssues words it
  ['too many tensors', 'too large to simulate: 1,200,000 parameter and buffer tensors; the limit is 1,000,000'],
  ['a cap over 1 PiB', issue(plan({ preset: 'gpt2' }, {}, { gpu: { memory_limit_bytes: 2 ** 51 } }), 'gpu.memory_limit_bytes')],
  ['a cap of 80 bytes', issue(plan({ preset: 'gpt2' }, {}, { gpu: { memory_limit_bytes: 80 } }), 'gpu.memory_limit_bytes')],
  ['nothing to train', issue(plan({ input_features: 64, layers: [{ type: 'relu' }] }), 'model.layers')],
  // a layer list, the GPU, the allocator settings
  ['a linear layer that does not line up', refusal(plan({ input_features: 8, layers: [{ type: 'linear', in_features: 4, out_features: 8 }] }))],
  ['a conv2d that does not line up', refusal(plan({ input_shape: [3, 16, 16], layers: [{ type: 'conv2d', in_channels: 4, out_channels: 8, kernel_size: 3 }] }))],
  ['an embedding not first', refusal(plan({ input_shape: [3, 16, 16], layers: [{ type: 'flatten' }, { type: 'embedding', num_embeddings: 4, embedding_dim: 8 }] }))],
  ['an unknown GPU', issue(plan({ preset: 'gpt2' }, {}, { gpu: { name: 'a100' } }), 'gpu.name')],
  ['an unknown allocator setting', issue(plan({ preset: 'gpt2' }, {}, { allocator: { conf: 'foo:1' } }), 'allocator.conf')],
  ['max_split_size_mb', issue(plan({ preset: 'gpt2' }, {}, { allocator: { conf: 'max_split_size_mb:10' } }), 'allocator.conf max_split_size_mb')],
  ['garbage_collection_threshold', issue(plan({ preset: 'gpt2' }, {}, { allocator: { conf: 'garbage_collection_threshold:1.5' } }), 'allocator.conf garbage_collection_threshold')],
  ['roundup_power2_divisions', issue(plan({ preset: 'gpt2' }, {}, { allocator: { conf: 'roundup_power2_divisions:[64:3]' } }), 'allocator.conf roundup_power2_divisions')],
  ['expandable_segments', issue(plan({ preset: 'gpt2' }, {}, { allocator: { conf: 'expandable_segments:maybe' } }), 'allocator.conf expandable_segments')],
  ['an allocator setting without a value', issue(plan({ preset: 'gpt2' }, {}, { allocator: { conf: 'nokey' } }), 'allocator.conf')],
  // the allocator settings PyTorch 2.11 refuses, or memplan does not simulate as given (test/engine/allocator/config.test.ts)
  ['backend:cudaMallocAsync', issue(plan({ preset: 'gpt2' }, {}, { allocator: { conf: 'backend:cudaMallocAsync' } }), 'allocator.conf backend')],
  ['per_process_memory_fraction', issue(plan({ preset: 'gpt2' }, {}, { allocator: { conf: 'per_process_memory_fraction:0.5' } }), 'allocator.conf per_process_memory_fraction')],
  ['an unknown allocator setting', issue(plan({ preset: 'gpt2' }, {}, { allocator: { conf: 'throw_on_cudamalloc_oom:True' } }), 'allocator.conf')],
  ['large_segment_size_mb of 10', issue(plan({ preset: 'gpt2' }, {}, { allocator: { conf: 'large_segment_size_mb:10' } }), 'allocator.conf large_segment_size_mb')],
  ['max_split_size_mb under the large_segment_size_mb given', issue(plan({ preset: 'gpt2' }, {}, { allocator: { conf: 'max_split_size_mb:30,large_segment_size_mb:40' } }), 'allocator.conf max_split_size_mb')],
  ['an odd large_segment_size_mb with expandable segments', issue(plan({ preset: 'gpt2' }, {}, { allocator: { conf: 'expandable_segments:True,large_segment_size_mb:11' } }), 'allocator.conf large_segment_size_mb')],
  // bounds zod words by default (engine/plan/issues.ts boundWords)
  ['training.steps, too many', issue(plan({ preset: 'gpt2' }, { steps: 1000000 }), 'training.steps')],
  ['a layer list, empty', issue(plan({ input_features: 4, layers: [] }), 'model.layers')],
  ['a dropout probability above 1', issue(plan({ input_features: 4, layers: [{ type: 'dropout', p: 2 }] }), 'model.layers[0].p')],
];

const zh = (message: string) => localizeIssue(message, catalogues['zh-CN'], 'zh-CN');

/** What a translation must keep: quoted values, numbers, identifiers (snake_case, dotted, CamelCase). */
function kept(english: string): string[] {
  const tokens = english.match(/"(?:[^"\\]|\\.)*"|\d[\d,.^]*\d|\d|\b[A-Za-z]\w*_\w*\b|\b[a-z]\w*(?:\.\w+)+(?:\(\))?|\b[A-Za-z]*[a-z][A-Z]\w*/g) ?? [];
  return tokens.filter((t) => t !== 'e.g');
}

/** The translation with its quoted values taken out: what must read as Chinese. */
const unquoted = (text: string) => text.replace(/"(?:[^"\\]|\\.)*"/g, '""');

describe('engine problems in Chinese', () => {
  it.each(cases)('%s', (_name, english) => {
    const chinese = zh(english);
    expect(chinese, english).not.toBe(english);
    expect(chinese).toMatch(/[\u4e00-\u9fff]/);
    // no English sentence left over (three words in a row)
    expect(unquoted(chinese)).not.toMatch(/[a-z]{4,} [a-z]{3,} [a-z]{3,}/i);
    expect(unquoted(chinese)).not.toMatch(/\b(?:is|are|the|must|not|yet|got|with|and|or|of|for)\b/);
    for (const token of kept(english)) expect(chinese, `${english}\n${chinese}`).toContain(token);
    // English stays as the engine wrote it
    expect(localizeIssue(english, catalogues.en, 'en')).toBe(english);
  });

  it('words every variable part: the model_type, the numbers, the names', () => {
    expect(zh(cases.find(([n]) => n === "target_modules matching none of BERT's nn.Linear")![1])).toBe('此模型中没有名为 "q_proj" 或 "v_proj" 的 nn.Linear；它的 nn.Linear 模块名为：query, key, value, dense');
    expect(zh(cases.find(([n]) => n === 'lora.dropout, 1.5')![1])).toBe('必须小于 1，实际为 1.5');
    expect(cases.find(([n]) => n === 'training.steps, too many')![1]).toBe('must be at most 20, got 1000000');
    expect(zh(cases.find(([n]) => n === 'training.steps, too many')![1])).toBe('不能超过 20，实际为 1000000');
    expect(cases.find(([n]) => n === 'a layer list, empty')![1]).toBe('must have at least 1 item');
    expect(zh(cases.find(([n]) => n === 'a layer list, empty')![1])).toBe('至少要有 1 项');
    expect(zh(cases.find(([n]) => n === 'lora.target_modules, an empty name')![1])).toBe('不能为空，实际为 ""（文本）');
    expect(zh(cases.find(([n]) => n === 'target_modules matching no nn.Linear')![1])).toBe(
      '此模型中没有名为 "c_attn" 或 "qkv" 的 nn.Linear；它的 nn.Linear 模块名为：q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, lm_head',
    );
    expect(zh(cases.find(([n]) => n === "target_modules matching none of GPT-2's Conv1D")![1])).toBe('此模型中没有名为 "q_proj" 的 Conv1D；它的 Conv1D 模块名为：c_attn, c_proj, c_fc');
    expect(zh(cases.find(([n]) => n === 'an unknown GPU')![1])).toMatch(/；是否想输入以下之一："a100-40gb", "a100-80gb", "a100-80gb-pcie"？$/);
    expect(zh(cases.find(([n]) => n === 'eager sliding-window attention')![1])).toBe('暂不支持模拟 seq_len 为 256 时的 eager 滑动窗口注意力（窗口 128）：请使用 attention "sdpa"，或小于窗口的 seq_len');
  });

  it('shows a message of another shape as the engine wrote it', () => {
    expect(zh('something new the engine says')).toBe('something new the engine says');
  });

  it('words an engine error that crossed as text with its field path (a compared change, an advice change not simulated)', () => {
    let message = '';
    try {
      simulate(parsePlan(plan({ preset: 'gpt2' }, { seq_len: 2048 })), { device: planGpu(parsePlan(plan({ preset: 'gpt2' }))), timelinePoints: 0 });
    } catch (error) {
      if (!(error instanceof InputError)) throw error;
      message = error.message;
    }
    expect(message).toBe("training.seq_len: 2048 is more than the model's 1024 positions");
    expect(localizeIssue(message, catalogues['zh-CN'], 'zh-CN')).toBe(message); // the path keeps the pattern from matching
    expect(localizeEngineMessage(message, catalogues['zh-CN'], 'zh-CN')).toBe('training.seq_len: 2048 超过了模型的最大位置数 1024');
    expect(localizeEngineMessage(message, catalogues.en, 'en')).toBe(message);
    expect(localizeEngineMessage('not a field: something', catalogues['zh-CN'], 'zh-CN')).toBe('not a field: something');
  });
});
