/**
 * Model presets: the models users train, by name. Hugging Face presets are the models' published config.json
 * contents (the keys that matter for memory; transformers fills the rest with its defaults, as for a pasted
 * config); torchvision presets name the constructor. A plan says `{"preset": "llama-3-8b"}`.
 */
export interface HfPreset {
  kind: 'hf';
  /** The Hub repository the config comes from. */
  source: string;
  config: Record<string, unknown>;
}

export interface TorchvisionPreset {
  kind: 'torchvision';
  name: 'resnet18' | 'resnet34' | 'resnet50' | 'resnet101' | 'resnet152' | 'vit_b_16' | 'vit_l_16';
}

export type Preset = (HfPreset | TorchvisionPreset) & { family: string; parameters: string };

const gpt2 = (source: string, n_embd: number, n_layer: number, n_head: number, parameters: string): Preset => ({
  kind: 'hf',
  family: 'GPT-2',
  parameters,
  source,
  config: { model_type: 'gpt2', architectures: ['GPT2LMHeadModel'], vocab_size: 50257, n_positions: 1024, n_ctx: 1024, n_embd, n_layer, n_head, activation_function: 'gelu_new', resid_pdrop: 0.1, embd_pdrop: 0.1, attn_pdrop: 0.1 },
});

const bert = (source: string, hidden_size: number, num_hidden_layers: number, num_attention_heads: number, intermediate_size: number, parameters: string): Preset => ({
  kind: 'hf',
  family: 'BERT',
  parameters,
  source,
  config: { model_type: 'bert', architectures: ['BertForMaskedLM'], vocab_size: 30522, hidden_size, num_hidden_layers, num_attention_heads, intermediate_size, hidden_act: 'gelu', hidden_dropout_prob: 0.1, attention_probs_dropout_prob: 0.1, max_position_embeddings: 512, type_vocab_size: 2 },
});

/** RoBERTa and XLM-RoBERTa as their published config.json give them: 514 positions, one token type, padding 1. */
const roberta = (modelType: 'roberta' | 'xlm-roberta', source: string, hidden_size: number, num_hidden_layers: number, num_attention_heads: number, intermediate_size: number, parameters: string): Preset => ({
  kind: 'hf',
  family: modelType === 'roberta' ? 'RoBERTa' : 'XLM-RoBERTa',
  parameters,
  source,
  config: {
    model_type: modelType,
    architectures: [modelType === 'roberta' ? 'RobertaForMaskedLM' : 'XLMRobertaForMaskedLM'],
    vocab_size: modelType === 'roberta' ? 50265 : 250002,
    hidden_size,
    num_hidden_layers,
    num_attention_heads,
    intermediate_size,
    hidden_act: 'gelu',
    hidden_dropout_prob: 0.1,
    attention_probs_dropout_prob: 0.1,
    max_position_embeddings: 514,
    type_vocab_size: 1,
    pad_token_id: 1,
    layer_norm_eps: 1e-5,
  },
});

interface DecoderShape {
  hidden_size: number;
  intermediate_size: number;
  num_hidden_layers: number;
  num_attention_heads: number;
  num_key_value_heads: number;
  vocab_size: number;
  max_position_embeddings: number;
  tie_word_embeddings?: boolean;
  head_dim?: number;
  sliding_window?: number | null;
  rope_parameters?: Record<string, unknown>;
}

const decoder = (family: string, modelType: 'llama' | 'mistral' | 'qwen2' | 'qwen3' | 'phi3' | 'smollm3' | 'olmo2', arch: string, source: string, shape: DecoderShape, parameters: string): Preset => ({
  kind: 'hf',
  family,
  parameters,
  source,
  config: { model_type: modelType, architectures: [arch], hidden_act: 'silu', tie_word_embeddings: false, ...shape },
});

const llama = (source: string, shape: DecoderShape, parameters: string) => decoder('Llama', 'llama', 'LlamaForCausalLM', source, shape, parameters);
const qwen2 = (source: string, shape: DecoderShape, parameters: string) => decoder('Qwen2', 'qwen2', 'Qwen2ForCausalLM', source, shape, parameters);
// Qwen3: head_dim 128 at every size, 151,936 tokens, 40,960 positions; the small ones tie lm_head to embed_tokens
const qwen3 = (source: string, shape: Omit<DecoderShape, 'vocab_size' | 'max_position_embeddings' | 'head_dim'>, parameters: string) =>
  decoder('Qwen3', 'qwen3', 'Qwen3ForCausalLM', source, { vocab_size: 151936, max_position_embeddings: 40960, head_dim: 128, ...shape }, parameters);
const phi3 = (source: string, shape: DecoderShape, parameters: string) => decoder('Phi-3', 'phi3', 'Phi3ForCausalLM', source, shape, parameters);
// Gemma 2 and Gemma 3 (text): tied 256k-token embeddings, gelu_pytorch_tanh, sliding and global layers alternating.
// Gemma 3's 4B, 12B and 27B are multimodal checkpoints: the presets are their text_config, as Gemma3ForCausalLM
// loads it (the SigLIP vision tower is not part of it).
const gemma2 = (source: string, shape: Record<string, unknown>, parameters: string): Preset => ({
  kind: 'hf',
  family: 'Gemma 2',
  parameters,
  source,
  config: { model_type: 'gemma2', architectures: ['Gemma2ForCausalLM'], vocab_size: 256000, max_position_embeddings: 8192, hidden_activation: 'gelu_pytorch_tanh', sliding_window: 4096, attn_logit_softcapping: 50.0, final_logit_softcapping: 30.0, tie_word_embeddings: true, ...shape },
});
const gemma3 = (source: string, shape: Record<string, unknown>, parameters: string): Preset => ({
  kind: 'hf',
  family: 'Gemma 3',
  parameters,
  source,
  config: { model_type: 'gemma3_text', architectures: ['Gemma3ForCausalLM'], hidden_activation: 'gelu_pytorch_tanh', rope_theta: 1000000, rope_local_base_freq: 10000, sliding_window_pattern: 6, attn_logit_softcapping: null, final_logit_softcapping: null, tie_word_embeddings: true, ...shape },
});
/** Qwen3's MoE models (Qwen/Qwen3-30B-A3B, Qwen3-235B-A22B config.json): 128 experts, 8 a token, renormalized. */
const qwen3Moe = (source: string, shape: Record<string, unknown>, parameters: string): Preset => ({
  kind: 'hf',
  family: 'Qwen3-MoE',
  parameters,
  source,
  config: {
    model_type: 'qwen3_moe',
    architectures: ['Qwen3MoeForCausalLM'],
    hidden_act: 'silu',
    vocab_size: 151936,
    max_position_embeddings: 40960,
    head_dim: 128,
    num_key_value_heads: 4,
    num_experts: 128,
    num_experts_per_tok: 8,
    norm_topk_prob: true,
    decoder_sparse_step: 1,
    mlp_only_layers: [],
    rope_theta: 1000000,
    tie_word_embeddings: false,
    output_router_logits: false,
    ...shape,
  },
});

// Mixtral: Mistral's attention (32k-token vocabulary for 8x7B, 32,768 for 8x22B; no sliding window) with 8 experts
// a layer, 2 of them per token, in place of the MLP.
const mixtral = (source: string, shape: Record<string, unknown>, parameters: string): Preset => ({
  kind: 'hf',
  family: 'Mixtral',
  parameters,
  source,
  config: { model_type: 'mixtral', architectures: ['MixtralForCausalLM'], hidden_act: 'silu', num_local_experts: 8, num_experts_per_tok: 2, rope_theta: 1000000, sliding_window: null, tie_word_embeddings: false, output_router_logits: false, router_jitter_noise: 0, ...shape },
});

export const PRESETS: Record<string, Preset> = {
  gpt2: gpt2('openai-community/gpt2', 768, 12, 12, '124M'),
  'gpt2-medium': gpt2('openai-community/gpt2-medium', 1024, 24, 16, '355M'),
  'gpt2-large': gpt2('openai-community/gpt2-large', 1280, 36, 20, '774M'),
  'gpt2-xl': gpt2('openai-community/gpt2-xl', 1600, 48, 25, '1.56B'),
  'bert-base': bert('google-bert/bert-base-uncased', 768, 12, 12, 3072, '110M'),
  'bert-large': bert('google-bert/bert-large-uncased', 1024, 24, 16, 4096, '336M'),
  'roberta-base': roberta('roberta', 'FacebookAI/roberta-base', 768, 12, 12, 3072, '125M'),
  'roberta-large': roberta('roberta', 'FacebookAI/roberta-large', 1024, 24, 16, 4096, '355M'),
  'xlm-roberta-base': roberta('xlm-roberta', 'FacebookAI/xlm-roberta-base', 768, 12, 12, 3072, '278M'),
  'xlm-roberta-large': roberta('xlm-roberta', 'FacebookAI/xlm-roberta-large', 1024, 24, 16, 4096, '560M'),
  'tinyllama-1.1b': llama('TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T', { hidden_size: 2048, intermediate_size: 5632, num_hidden_layers: 22, num_attention_heads: 32, num_key_value_heads: 4, vocab_size: 32000, max_position_embeddings: 2048 }, '1.1B'),
  'llama-2-7b': llama('meta-llama/Llama-2-7b-hf', { hidden_size: 4096, intermediate_size: 11008, num_hidden_layers: 32, num_attention_heads: 32, num_key_value_heads: 32, vocab_size: 32000, max_position_embeddings: 4096 }, '6.7B'),
  'llama-2-13b': llama('meta-llama/Llama-2-13b-hf', { hidden_size: 5120, intermediate_size: 13824, num_hidden_layers: 40, num_attention_heads: 40, num_key_value_heads: 40, vocab_size: 32000, max_position_embeddings: 4096 }, '13B'),
  'llama-2-70b': llama('meta-llama/Llama-2-70b-hf', { hidden_size: 8192, intermediate_size: 28672, num_hidden_layers: 80, num_attention_heads: 64, num_key_value_heads: 8, vocab_size: 32000, max_position_embeddings: 4096 }, '69B'),
  'llama-3-8b': llama('meta-llama/Meta-Llama-3-8B', { hidden_size: 4096, intermediate_size: 14336, num_hidden_layers: 32, num_attention_heads: 32, num_key_value_heads: 8, vocab_size: 128256, max_position_embeddings: 8192 }, '8.0B'),
  'llama-3-70b': llama('meta-llama/Meta-Llama-3-70B', { hidden_size: 8192, intermediate_size: 28672, num_hidden_layers: 80, num_attention_heads: 64, num_key_value_heads: 8, vocab_size: 128256, max_position_embeddings: 8192 }, '70.6B'),
  'llama-3.2-1b': llama('meta-llama/Llama-3.2-1B', { hidden_size: 2048, intermediate_size: 8192, num_hidden_layers: 16, num_attention_heads: 32, num_key_value_heads: 8, head_dim: 64, vocab_size: 128256, max_position_embeddings: 131072, tie_word_embeddings: true }, '1.2B'),
  'llama-3.2-3b': llama('meta-llama/Llama-3.2-3B', { hidden_size: 3072, intermediate_size: 8192, num_hidden_layers: 28, num_attention_heads: 24, num_key_value_heads: 8, head_dim: 128, vocab_size: 128256, max_position_embeddings: 131072, tie_word_embeddings: true }, '3.2B'),
  'mistral-7b': decoder('Mistral', 'mistral', 'MistralForCausalLM', 'mistralai/Mistral-7B-v0.3', { hidden_size: 4096, intermediate_size: 14336, num_hidden_layers: 32, num_attention_heads: 32, num_key_value_heads: 8, vocab_size: 32768, max_position_embeddings: 32768, sliding_window: null }, '7.2B'),
  'qwen2.5-0.5b': qwen2('Qwen/Qwen2.5-0.5B', { hidden_size: 896, intermediate_size: 4864, num_hidden_layers: 24, num_attention_heads: 14, num_key_value_heads: 2, vocab_size: 151936, max_position_embeddings: 32768, tie_word_embeddings: true }, '0.49B'),
  'qwen2.5-1.5b': qwen2('Qwen/Qwen2.5-1.5B', { hidden_size: 1536, intermediate_size: 8960, num_hidden_layers: 28, num_attention_heads: 12, num_key_value_heads: 2, vocab_size: 151936, max_position_embeddings: 131072, tie_word_embeddings: true }, '1.5B'),
  'qwen2.5-7b': qwen2('Qwen/Qwen2.5-7B', { hidden_size: 3584, intermediate_size: 18944, num_hidden_layers: 28, num_attention_heads: 28, num_key_value_heads: 4, vocab_size: 152064, max_position_embeddings: 131072 }, '7.6B'),
  'qwen3-0.6b': qwen3('Qwen/Qwen3-0.6B', { hidden_size: 1024, intermediate_size: 3072, num_hidden_layers: 28, num_attention_heads: 16, num_key_value_heads: 8, tie_word_embeddings: true }, '0.6B'),
  'qwen3-1.7b': qwen3('Qwen/Qwen3-1.7B', { hidden_size: 2048, intermediate_size: 6144, num_hidden_layers: 28, num_attention_heads: 16, num_key_value_heads: 8, tie_word_embeddings: true }, '1.7B'),
  'qwen3-4b': qwen3('Qwen/Qwen3-4B', { hidden_size: 2560, intermediate_size: 9728, num_hidden_layers: 36, num_attention_heads: 32, num_key_value_heads: 8, tie_word_embeddings: true }, '4.0B'),
  'qwen3-8b': qwen3('Qwen/Qwen3-8B', { hidden_size: 4096, intermediate_size: 12288, num_hidden_layers: 36, num_attention_heads: 32, num_key_value_heads: 8 }, '8.2B'),
  'qwen3-14b': qwen3('Qwen/Qwen3-14B', { hidden_size: 5120, intermediate_size: 17408, num_hidden_layers: 40, num_attention_heads: 40, num_key_value_heads: 8 }, '14.8B'),
  'qwen3-32b': qwen3('Qwen/Qwen3-32B', { hidden_size: 5120, intermediate_size: 25600, num_hidden_layers: 64, num_attention_heads: 64, num_key_value_heads: 8 }, '32.8B'),
  'phi-3-mini-4k': phi3('microsoft/Phi-3-mini-4k-instruct', { hidden_size: 3072, intermediate_size: 8192, num_hidden_layers: 32, num_attention_heads: 32, num_key_value_heads: 32, vocab_size: 32064, max_position_embeddings: 4096, sliding_window: 2047 }, '3.8B'),
  'phi-3-mini-128k': phi3('microsoft/Phi-3-mini-128k-instruct', { hidden_size: 3072, intermediate_size: 8192, num_hidden_layers: 32, num_attention_heads: 32, num_key_value_heads: 32, vocab_size: 32064, max_position_embeddings: 131072, sliding_window: 262144 }, '3.8B'),
  'phi-3-medium-4k': phi3('microsoft/Phi-3-medium-4k-instruct', { hidden_size: 5120, intermediate_size: 17920, num_hidden_layers: 40, num_attention_heads: 40, num_key_value_heads: 10, vocab_size: 32064, max_position_embeddings: 4096, sliding_window: 2047 }, '14B'),
  'phi-4-mini': phi3('microsoft/Phi-4-mini-instruct', { hidden_size: 3072, intermediate_size: 8192, num_hidden_layers: 32, num_attention_heads: 24, num_key_value_heads: 8, vocab_size: 200064, max_position_embeddings: 131072, tie_word_embeddings: true, sliding_window: 262144, rope_parameters: { rope_type: 'longrope', partial_rotary_factor: 0.75 } }, '3.8B'),
  'gemma-2-2b': gemma2('google/gemma-2-2b', { hidden_size: 2304, intermediate_size: 9216, num_hidden_layers: 26, num_attention_heads: 8, num_key_value_heads: 4, head_dim: 256, query_pre_attn_scalar: 256 }, '2.6B'),
  'gemma-2-9b': gemma2('google/gemma-2-9b', { hidden_size: 3584, intermediate_size: 14336, num_hidden_layers: 42, num_attention_heads: 16, num_key_value_heads: 8, head_dim: 256, query_pre_attn_scalar: 256 }, '9.2B'),
  'gemma-2-27b': gemma2('google/gemma-2-27b', { hidden_size: 4608, intermediate_size: 36864, num_hidden_layers: 46, num_attention_heads: 32, num_key_value_heads: 16, head_dim: 128, query_pre_attn_scalar: 144 }, '27.2B'),
  'gemma-3-1b': gemma3('google/gemma-3-1b-pt', { hidden_size: 1152, intermediate_size: 6912, num_hidden_layers: 26, num_attention_heads: 4, num_key_value_heads: 1, head_dim: 256, query_pre_attn_scalar: 256, vocab_size: 262144, max_position_embeddings: 32768, sliding_window: 512 }, '1.0B'),
  'gemma-3-4b': gemma3('google/gemma-3-4b-pt (text_config)', { hidden_size: 2560, intermediate_size: 10240, num_hidden_layers: 34, num_attention_heads: 8, num_key_value_heads: 4, head_dim: 256, query_pre_attn_scalar: 256, vocab_size: 262208, max_position_embeddings: 131072, sliding_window: 1024, rope_scaling: { rope_type: 'linear', factor: 8 } }, '3.9B text'),
  'gemma-3-12b': gemma3('google/gemma-3-12b-pt (text_config)', { hidden_size: 3840, intermediate_size: 15360, num_hidden_layers: 48, num_attention_heads: 16, num_key_value_heads: 8, head_dim: 256, query_pre_attn_scalar: 256, vocab_size: 262208, max_position_embeddings: 131072, sliding_window: 1024, rope_scaling: { rope_type: 'linear', factor: 8 } }, '11.8B text'),
  'gemma-3-27b': gemma3('google/gemma-3-27b-pt (text_config)', { hidden_size: 5376, intermediate_size: 21504, num_hidden_layers: 62, num_attention_heads: 32, num_key_value_heads: 16, head_dim: 128, query_pre_attn_scalar: 168, vocab_size: 262208, max_position_embeddings: 131072, sliding_window: 1024, rope_scaling: { rope_type: 'linear', factor: 8 } }, '27.0B text'),
  // SmolLM3-3B: Llama's layers, every fourth without a rotary embedding (no_rope_layers' default)
  'smollm3-3b': decoder('SmolLM3', 'smollm3', 'SmolLM3ForCausalLM', 'HuggingFaceTB/SmolLM3-3B', { vocab_size: 128256, hidden_size: 2048, intermediate_size: 11008, num_hidden_layers: 36, num_attention_heads: 16, num_key_value_heads: 4, max_position_embeddings: 65536, tie_word_embeddings: true }, '3.1B'),
  // OLMo 2: norms after attention and the MLP, q/k norms over the projections
  'olmo-2-1b': decoder('OLMo 2', 'olmo2', 'Olmo2ForCausalLM', 'allenai/OLMo-2-0425-1B', { vocab_size: 100352, hidden_size: 2048, intermediate_size: 8192, num_hidden_layers: 16, num_attention_heads: 16, num_key_value_heads: 16, max_position_embeddings: 4096 }, '1.5B'),
  'olmo-2-7b': decoder('OLMo 2', 'olmo2', 'Olmo2ForCausalLM', 'allenai/OLMo-2-1124-7B', { vocab_size: 100352, hidden_size: 4096, intermediate_size: 11008, num_hidden_layers: 32, num_attention_heads: 32, num_key_value_heads: 32, max_position_embeddings: 4096 }, '7.3B'),
  'qwen3-30b-a3b': qwen3Moe('Qwen/Qwen3-30B-A3B', { hidden_size: 2048, intermediate_size: 6144, moe_intermediate_size: 768, num_hidden_layers: 48, num_attention_heads: 32 }, '30.5B'),
  'qwen3-235b-a22b': qwen3Moe('Qwen/Qwen3-235B-A22B', { hidden_size: 4096, intermediate_size: 12288, moe_intermediate_size: 1536, num_hidden_layers: 94, num_attention_heads: 64 }, '235B'),
  'mixtral-8x7b': mixtral('mistralai/Mixtral-8x7B-v0.1', { hidden_size: 4096, intermediate_size: 14336, num_hidden_layers: 32, num_attention_heads: 32, num_key_value_heads: 8, vocab_size: 32000, max_position_embeddings: 32768 }, '46.7B'),
  'mixtral-8x22b': mixtral('mistralai/Mixtral-8x22B-v0.1', { hidden_size: 6144, intermediate_size: 16384, num_hidden_layers: 56, num_attention_heads: 48, num_key_value_heads: 8, vocab_size: 32768, max_position_embeddings: 65536 }, '141B'),
  resnet18: { kind: 'torchvision', family: 'ResNet', name: 'resnet18', parameters: '11.7M' },
  resnet34: { kind: 'torchvision', family: 'ResNet', name: 'resnet34', parameters: '21.8M' },
  resnet50: { kind: 'torchvision', family: 'ResNet', name: 'resnet50', parameters: '25.6M' },
  resnet101: { kind: 'torchvision', family: 'ResNet', name: 'resnet101', parameters: '44.5M' },
  resnet152: { kind: 'torchvision', family: 'ResNet', name: 'resnet152', parameters: '60.2M' },
  vit_b_16: { kind: 'torchvision', family: 'ViT', name: 'vit_b_16', parameters: '86.6M' },
  vit_l_16: { kind: 'torchvision', family: 'ViT', name: 'vit_l_16', parameters: '304M' },
};

export const PRESET_NAMES = Object.keys(PRESETS) as [string, ...string[]];
