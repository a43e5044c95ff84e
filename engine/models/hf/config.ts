/**
 * A Hugging Face `config.json`, as `AutoConfig` reads it: `model_type` picks the configuration class, whose
 * defaults fill the missing keys (transformers 5.x `configuration_*.py`), and `architectures` picks the head.
 * Only the keys that change memory are resolved; unknown keys are ignored, as transformers ignores them.
 */
import { InputError } from '../../errors.ts';
import type { TrainingSpec } from '../../plan/schema.ts';

export type HfFamily = 'gpt2' | 'llama' | 'gemma' | 'bert';

export type HfActivation = 'gelu' | 'gelu_new' | 'gelu_pytorch_tanh' | 'relu' | 'silu';

export interface Gpt2Config {
  family: 'gpt2';
  modelType: string;
  vocabSize: number;
  positions: number;
  hidden: number;
  layers: number;
  heads: number;
  inner: number;
  activation: HfActivation;
  residDropout: number;
  embdDropout: number;
  attnDropout: number;
  useCache: boolean;
}

export interface LlamaConfig {
  family: 'llama';
  modelType: 'llama' | 'mistral' | 'qwen2' | 'qwen3' | 'phi3' | 'mixtral' | 'qwen3_moe' | 'smollm3' | 'olmo2';
  vocabSize: number;
  hidden: number;
  intermediate: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  maxPositions: number;
  activation: HfActivation;
  attentionBias: boolean;
  /** Qwen2: biases on q, k and v only. */
  qkvBias: boolean;
  mlpBias: boolean;
  attentionDropout: number;
  tieWordEmbeddings: boolean;
  /** A sliding window that applies (Mistral's default 4096; Qwen2 and Qwen3 only with use_sliding_window). */
  slidingWindow: number | null;
  useCache: boolean;
  /** Qwen3: an RMSNorm over each head's query and key (`q_norm`, `k_norm`, weight [head_dim]) before the rotary embedding. */
  qkNorm: boolean;
  /** Phi-3: one `qkv_proj` and one `gate_up_proj` instead of q/k/v and gate/up projections. */
  fusedProjections: boolean;
  /** Phi-3: `resid_pdrop`, a dropout on each sublayer's output before its residual add. */
  residDropout: number;
  /** Dimensions of each head the rotary embedding turns (Phi-3's `partial_rotary_factor`); head_dim elsewhere. */
  rotaryDim: number;
  /** SmolLM3: the layers whose attention applies no rotary embedding (NoPE: `no_rope_layers[i]` 0); none elsewhere. */
  noRopeLayers: readonly number[];
  /**
   * `rope_type: "longrope"` (Phi-3 128k, Phi-3.5, Phi-4-mini): the rotary embedding's forward first switches its
   * inverse frequencies between the short and the long factors by the sequence length (modeling_rope_utils.py
   * `dynamic_rope_update`): the pretraining length it compares with. null for every other rope type.
   */
  longropeOriginalMax: number | null;
  /**
   * OLMo 2's layer: no norm before attention or the MLP, a norm after each (`post_attention_layernorm`,
   * `post_feedforward_layernorm`) before its residual add; q and k normed over their whole projection (weights
   * [heads x head_dim]); every RMSNorm applies its weight in fp32 and casts after (`(weight * x).to(dtype)`); the
   * rotary embedding's cos and sin stay fp32, q and k are rotated in fp32 and cast back.
   */
  normAfter: boolean;
  /**
   * Mixtral and Qwen3-MoE: the sparse mixture of experts that replaces the MLP (MixtralSparseMoeBlock,
   * Qwen3MoeSparseMoeBlock); null elsewhere.
   */
  moe: MoeConfig | null;
  /**
   * What the model trains: the causal LM, or (`architectures` naming `<Model>ForSequenceClassification`) the
   * `score` layer read at each sequence's last token that is not padding, or (`<Model>ForTokenClassification`) the
   * `score` layer on every token (config.ts `decoderHead`).
   */
  head: { kind: 'causal_lm' } | DecoderSequenceClassifierHead | TokenClassifierHead;
}

/**
 * What a sequence classifier trains on (`problem_type`, as transformers' sequence-classification loss decides it):
 * one class id per sequence with CrossEntropyLoss (`single_label_classification`, the default for two classes or
 * more), a float per label with MSELoss (`regression`, the default for one label), or a 0/1 float per label with
 * BCEWithLogitsLoss (`multi_label_classification`, which the config must name: transformers picks it from float
 * labels, and the plan's standard step gives class ids unless the config says otherwise).
 */
const PROBLEM_TYPES = ['regression', 'single_label_classification', 'multi_label_classification'] as const;
export type ProblemType = (typeof PROBLEM_TYPES)[number];

/** A `*ForTokenClassification` head (named-entity recognition and the like): `num_labels` classes for every token. */
export interface TokenClassifierHead {
  kind: 'token_classification';
  numLabels: number;
  /** `classifier_dropout`, else the hidden dropout (a decoder's `hidden_dropout`, else 0.1). */
  dropout: number;
  /** Whether the classifier has a bias: BERT's always; a decoder's `score` as `token_classification_bias` says (default true). */
  bias: boolean;
}

export interface SequenceClassifierHead {
  kind: 'sequence_classification';
  numLabels: number;
  problem: ProblemType;
}

/**
 * A decoder's sequence classifier (GenericForSequenceClassification), which reads each sequence's logits at its last
 * token: the last one that is not padding where the config gives `pad_token_id`, else the last position, which
 * transformers allows for one sequence a batch only (`checkLastTokenBatch`).
 */
export interface DecoderSequenceClassifierHead extends SequenceClassifierHead {
  /** The classifier class `architectures` names (for messages). */
  architecture: string;
  /** Whether the config gives `pad_token_id`. */
  padded: boolean;
}

export interface MoeConfig {
  /** `num_local_experts` (Mixtral), `num_experts` (Qwen3-MoE). */
  experts: number;
  /** `num_experts_per_tok`. */
  topK: number;
  /** Each expert's intermediate size: `intermediate_size` (Mixtral), `moe_intermediate_size` (Qwen3-MoE). */
  intermediate: number;
  /**
   * Whose block: Mixtral's router upcasts the logits (`.float()`), softmaxes and always renormalizes the top-k
   * weights, which stay fp32; Qwen3-MoE's softmaxes with `dtype=torch.float`, renormalizes only with
   * `norm_topk_prob`, and casts the weights back to the logits' dtype; its block registers the experts before the
   * router (the parameters' order).
   */
  kind: 'mixtral' | 'qwen3_moe';
  /** Qwen3-MoE's `norm_topk_prob` (Mixtral always renormalizes). */
  normTopK: boolean;
  /** Layers whose MLP is dense (`mlp_only_layers`, `decoder_sparse_step`: Qwen3-MoE), of `intermediate_size`. */
  denseLayers: readonly number[];
}

/** A layer's attention in Gemma 2 and Gemma 3 (`config.layer_types`). */
export type GemmaLayerType = 'sliding_attention' | 'full_attention';

export interface GemmaConfig {
  family: 'gemma';
  modelType: 'gemma2' | 'gemma3_text';
  vocabSize: number;
  hidden: number;
  intermediate: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  maxPositions: number;
  activation: HfActivation;
  attentionBias: boolean;
  attentionDropout: number;
  tieWordEmbeddings: boolean;
  /** The window of the sliding layers. */
  slidingWindow: number;
  /** Each layer's attention: sliding-window or global. */
  layerTypes: GemmaLayerType[];
  /** Gemma 2: `attn_logit_softcapping` (eager attention applies it; SDPA drops it). */
  attnSoftcap: number | null;
  /** `final_logit_softcapping`: logits / cap, tanh, * cap over the vocabulary. */
  finalSoftcap: number | null;
  useCache: boolean;
  /** Gemma 3: q_norm and k_norm over each head (weight [head_dim]). */
  qkNorm: boolean;
  /** The causal LM, or a sequence or token classifier (`decoderHead`: the final soft-capping is the causal LM's alone). */
  head: LlamaConfig['head'];
}

export interface BertConfig {
  family: 'bert';
  /** RoBERTa and XLM-RoBERTa: BERT's encoder, their own embeddings' position ids and heads (bert.ts). */
  modelType: 'bert' | 'roberta' | 'xlm-roberta';
  vocabSize: number;
  hidden: number;
  layers: number;
  heads: number;
  intermediate: number;
  activation: HfActivation;
  hiddenDropout: number;
  attentionDropout: number;
  maxPositions: number;
  typeVocabSize: number;
  tieWordEmbeddings: boolean;
  /**
   * The head `architectures` names: BertForMaskedLM (also without `architectures`; BertForPreTraining and BertModel,
   * which return no loss from input_ids and labels, are refused: `withoutLoss`), BertForSequenceClassification
   * (`num_labels` outputs, trained as `problem` says), or BertForTokenClassification (`num_labels` classes for every
   * token: one class id per token, CrossEntropyLoss).
   */
  head: { kind: 'masked_lm' } | (SequenceClassifierHead & { dropout: number }) | TokenClassifierHead;
  /**
   * Positions the table holds before the first token's: RoBERTa counts position ids from `pad_token_id + 1`, so
   * its 514 positions take 512 tokens; 0 for BERT.
   */
  positionOffset: number;
}

export type HfConfig = Gpt2Config | LlamaConfig | GemmaConfig | BertConfig;

const WHERE = 'model.hf_config';

/** The `model_type`s memplan simulates (each a case of `resolveHfConfig`). */
export const HF_MODEL_TYPES: readonly string[] = ['gpt2', 'llama', 'mistral', 'qwen2', 'qwen3', 'phi3', 'mixtral', 'qwen3_moe', 'smollm3', 'olmo2', 'gemma2', 'gemma3_text', 'bert', 'roberta', 'xlm-roberta'];

/**
 * The model types memplan trains no `…ForTokenClassification` for: GPT-2 (simulated as its language model alone),
 * and those transformers 5.17 has none for (measured: test/fixtures/device/h100_classifier_heads.json).
 */
export const WITHOUT_TOKEN_CLASSIFIER: readonly string[] = ['gpt2', 'olmo2', 'gemma3_text'];

/** A decoder's token classifier, `<model>ForTokenClassification`, or null where it has none (WITHOUT_TOKEN_CLASSIFIER). */
function tokenClassifierOf(modelType: string, model: string): string | null {
  return WITHOUT_TOKEN_CLASSIFIER.includes(modelType) ? null : `${model}ForTokenClassification`;
}

/** What `checkArchitectures` accepts for a decoder: its causal LM, its sequence classifier and its token classifier if it has one. */
function decoderArchitectures(modelType: string, model: string, causalLm = `${model}ForCausalLM`, classifier = `${model}ForSequenceClassification`): string[] {
  const tokenClassifier = tokenClassifierOf(modelType, model);
  return tokenClassifier ? [causalLm, classifier, tokenClassifier] : [causalLm, classifier];
}

function read(raw: Record<string, unknown>, key: string): unknown {
  return raw[key];
}

function int(raw: Record<string, unknown>, key: string, fallback: number | null): number {
  const v = read(raw, key);
  if (v === undefined || v === null) {
    if (fallback === null) throw new InputError(`${WHERE}.${key}`, 'is required for this model_type');
    return fallback;
  }
  if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0) throw new InputError(`${WHERE}.${key}`, `must be a positive integer, got ${JSON.stringify(v)}`);
  return v;
}

function prob(raw: Record<string, unknown>, key: string, fallback: number): number {
  const v = read(raw, key);
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'number' || v < 0 || v > 1) throw new InputError(`${WHERE}.${key}`, `must be a probability between 0 and 1, got ${JSON.stringify(v)}`);
  return v;
}

function bool(raw: Record<string, unknown>, key: string, fallback: boolean): boolean {
  const v = read(raw, key);
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'boolean') throw new InputError(`${WHERE}.${key}`, `must be true or false, got ${JSON.stringify(v)}`);
  return v;
}

const ACTIVATIONS: Record<string, HfActivation> = {
  gelu: 'gelu',
  gelu_new: 'gelu_new',
  gelu_pytorch_tanh: 'gelu_pytorch_tanh',
  relu: 'relu',
  silu: 'silu',
  swish: 'silu',
};

function activation(raw: Record<string, unknown>, key: string, fallback: string): HfActivation {
  const v = read(raw, key) ?? fallback;
  const a = typeof v === 'string' ? ACTIVATIONS[v] : undefined;
  if (!a) throw new InputError(`${WHERE}.${key}`, `the activation ${JSON.stringify(v)} is not simulated yet; simulated: ${Object.keys(ACTIVATIONS).join(', ')}`);
  return a;
}

/**
 * A decoder's attention shape from its config.json, checked: hidden_size, num_attention_heads, num_key_value_heads
 * (the heads when the configuration's default is null) and head_dim (the configuration's default, or
 * hidden_size // num_attention_heads as transformers computes it when the config has none).
 */
function attentionShape(raw: Record<string, unknown>, hiddenDefault: number, headsDefault: number, kvDefault: number | null, headDimDefault: number | null) {
  const hidden = int(raw, 'hidden_size', hiddenDefault);
  const heads = int(raw, 'num_attention_heads', headsDefault);
  const kvHeads = int(raw, 'num_key_value_heads', kvDefault ?? heads);
  if (heads % kvHeads !== 0) throw new InputError(`${WHERE}.num_key_value_heads`, `must divide num_attention_heads (${heads})`);
  const headDim = int(raw, 'head_dim', headDimDefault ?? Math.floor(hidden / heads));
  // transformers' default head_dim is hidden_size // num_attention_heads: 0 makes q/k/v views PyTorch refuses
  if (headDim < 1) throw new InputError(`${WHERE}.hidden_size`, `must be at least num_attention_heads (${heads}), or give head_dim: hidden_size // num_attention_heads is 0`);
  return { hidden, heads, kvHeads, headDim };
}

/**
 * The heads memplan trains for a model type: causal LM for decoders, masked LM for the encoders, a sequence
 * classifier and (where transformers has one) a token classifier for either; `architectures`, when given, must name
 * one of them (its first class picks the head). `model` is the classes' prefix (`Bert`, `GPT2`, `Qwen3Moe`); the
 * first of `accepted` is what a config without `architectures` trains.
 */
function checkArchitectures(raw: Record<string, unknown>, model: string, accepted: readonly string[]): void {
  const archs = read(raw, 'architectures');
  if (archs === undefined || archs === null) return;
  if (!Array.isArray(archs) || archs.some((a) => typeof a !== 'string')) throw new InputError(`${WHERE}.architectures`, 'must be a list of class names');
  const first = archs[0] as string | undefined;
  if (first === undefined || accepted.includes(first)) return;
  const lossless = withoutLoss(first, model, accepted[0]!);
  throw new InputError(`${WHERE}.architectures`, lossless ?? `"${first}" is not simulated yet; memplan trains ${accepted.join(' or ')} for this model_type`);
}

/**
 * Classes of a model type that return no loss from `model(input_ids=ids, labels=ids)` (transformers 5.x), so the
 * Trainer cannot train them: its compute_loss raises "The model did not return a loss from the inputs, only the
 * following keys: ...". The bare model, `<Model>Model` (BertModel, RobertaModel, LlamaModel, GPT2Model, ...), has
 * no head: it returns hidden states (BaseModelOutputWithPoolingAndCrossAttentions, BaseModelOutputWithPast), no loss.
 * BertForPreTraining (modeling_bert.py) sets `total_loss` only `if labels is not None and next_sentence_label is not
 * None`, the masked-LM loss plus the next-sentence loss; with labels alone its `loss` is None. The encoders' were
 * trained as their masked LM before, silently; each is now refused with what to plan instead (`instead`: the head a
 * config without `architectures` trains).
 */
function withoutLoss(first: string, model: string, instead: string): string | null {
  const pretraining = model === 'Bert' && first === 'BertForPreTraining';
  const plan = `plan ${instead} instead${pretraining ? ' (the same encoder and masked-LM head, without the pooler and the next-sentence classifier)' : ''}: set architectures to ["${instead}"], or leave architectures out`;
  const trainer = 'the Trainer raises "The model did not return a loss from the inputs"';
  if (first === `${model}Model`) return `"${first}" is the bare model: it returns hidden states and no loss, and ${trainer}; ${plan}`;
  if (pretraining) {
    return `"${first}" returns no loss from input_ids and labels alone: it adds its next-sentence loss to the masked-LM loss only when next_sentence_label is given too (else its loss is None), and ${trainer}; ${plan}`;
  }
  return null;
}

function firstArchitecture(raw: Record<string, unknown>): string | undefined {
  const archs = read(raw, 'architectures');
  return Array.isArray(archs) && typeof archs[0] === 'string' ? archs[0] : undefined;
}

/**
 * A `*ForSequenceClassification` head's outputs and loss as PretrainedConfig and the loss read them: `num_labels`,
 * else the length of `id2label`, else 2; `problem_type` (`problemType`), else regression for one label and
 * single-label classification for more (the standard step's labels are class ids: `torch.randint(num_labels, (B,))`).
 */
function classifierHead(raw: Record<string, unknown>): SequenceClassifierHead {
  const numLabels = labelCount(raw);
  return { kind: 'sequence_classification', numLabels, problem: problemType(raw) ?? (numLabels === 1 ? 'regression' : 'single_label_classification') };
}

/** A classifier's outputs as PretrainedConfig reads them: `num_labels`, else the length of `id2label`, else 2. */
function labelCount(raw: Record<string, unknown>): number {
  const id2label = read(raw, 'id2label');
  const named = id2label !== null && typeof id2label === 'object' && !Array.isArray(id2label) ? Object.keys(id2label).length : null;
  // measured (transformers 5.17 from_dict): a given num_labels wins (its setter rebuilds id2label)
  if (named === 0 && read(raw, 'num_labels') == null) throw new InputError(`${WHERE}.id2label`, 'names no class: a classifier needs at least one');
  return int(raw, 'num_labels', named ?? 2);
}

/** `problem_type`, which PretrainedConfig checks for every model (measured: transformers 5.17 refuses other values). */
function problemType(raw: Record<string, unknown>): ProblemType | null {
  const given = read(raw, 'problem_type');
  if (given === undefined || given === null) return null;
  if (!PROBLEM_TYPES.includes(given as ProblemType)) {
    throw new InputError(`${WHERE}.problem_type`, `must be one of ${PROBLEM_TYPES.map((p) => `"${p}"`).join(', ')} (or null), got ${JSON.stringify(given)}`);
  }
  return given as ProblemType;
}

/**
 * Refuses a regression head on a model that computes in half precision without autocast (`training.precision`
 * bf16 or fp16): MSELoss's backward (mse_loss_backward's TensorIterator) requires its input, the float32 labels and
 * the gradient in one dtype and throws `Found dtype Float but expected BFloat16` (Half for float16), as the step
 * would on the GPU (measured on the H100, BERT and Llama). Under autocast mse_loss runs in float32 (its fp32 list).
 */
export function checkHeadPrecision(cfg: HfConfig, precision: TrainingSpec['precision']): void {
  if (cfg.family === 'gpt2' || cfg.head.kind !== 'sequence_classification' || cfg.head.problem !== 'regression') return;
  if (precision !== 'bf16' && precision !== 'fp16') return;
  const [dtype, name] = precision === 'bf16' ? ['bfloat16', 'BFloat16'] : ['float16', 'Half'];
  throw new InputError('training.precision', `a regression head (MSELoss) on a ${dtype} model fails in PyTorch: mse_loss's backward meets the float32 labels and throws "Found dtype Float but expected ${name}"; train in amp_${precision} or fp32, or cast the labels to ${dtype} in your own loop`);
}

/** BertForSequenceClassification's head: its labels and loss, and `classifier_dropout` (else the hidden dropout). */
function sequenceClassification(raw: Record<string, unknown>, hiddenDropout: number): SequenceClassifierHead & { dropout: number } {
  return { ...classifierHead(raw), dropout: prob(raw, 'classifier_dropout', hiddenDropout) };
}

/** `pad_token_id`: a token id, or `fallback` when the config gives none. */
function padTokenId(raw: Record<string, unknown>, fallback: number | null): number | null {
  const pad = read(raw, 'pad_token_id');
  if (pad === undefined || pad === null) return fallback;
  if (typeof pad !== 'number' || !Number.isInteger(pad) || pad < 0) throw new InputError(`${WHERE}.pad_token_id`, `must be a token id (a non-negative integer), got ${JSON.stringify(pad)}`);
  return pad;
}

/**
 * The head of a decoder (modeling_layers.py): a causal LM; when `architectures` names `<Model>ForSequenceClassification`
 * (GenericForSequenceClassification), the `score` layer on every position and the logits of each sequence's last
 * token (`DecoderSequenceClassifierHead`); when it names `<Model>ForTokenClassification` (GenericForTokenClassification,
 * where transformers 5.17 has one: `tokenClassifier` null where it has none, WITHOUT_TOKEN_CLASSIFIER), dropout and `score` on every token.
 */
function decoderHead(raw: Record<string, unknown>, classifier: string, tokenClassifier: string | null): LlamaConfig['head'] {
  if (tokenClassifier !== null && firstArchitecture(raw) === tokenClassifier) {
    return { kind: 'token_classification', numLabels: labelCount(raw), dropout: prob(raw, 'classifier_dropout', prob(raw, 'hidden_dropout', 0.1)), bias: bool(raw, 'token_classification_bias', true) };
  }
  if (firstArchitecture(raw) !== classifier) return { kind: 'causal_lm' };
  return { ...classifierHead(raw), architecture: classifier, padded: padTokenId(raw, null) !== null };
}

/**
 * GenericForSequenceClassification.forward (transformers 5.17 modeling_layers.py) raises "Cannot handle batch sizes
 * > 1 if no padding token is defined." for a batch of more than one sequence when the config has no `pad_token_id`
 * (measured on the H100: llama_4l_cls_nopad_b2_bf16_adamw's first forward raised it; batch 1 trains on the last
 * position). The plan's batch is checked here (`checkLastTokenBatch`), and each batch the model runs (a search's).
 */
export function checkClassifierBatch(head: DecoderSequenceClassifierHead, batch: number): void {
  if (head.padded || batch <= 1) return;
  throw new InputError(
    `${WHERE}.pad_token_id`,
    `without pad_token_id, ${head.architecture} trains one sequence a batch: it finds each sequence's last token by its padding token, and at batch ${batch} transformers raises "Cannot handle batch sizes > 1 if no padding token is defined."; set pad_token_id (the Trainer recipes set model.config.pad_token_id to the tokenizer's)`,
  );
}

/** `checkClassifierBatch` for any model (a decoder's sequence classifier is the one that can fail). */
export function checkLastTokenBatch(cfg: HfConfig, batch: number): void {
  if ((cfg.family === 'llama' || cfg.family === 'gemma') && cfg.head.kind === 'sequence_classification') checkClassifierBatch(cfg.head, batch);
}

/**
 * BERT, RoBERTa and XLM-RoBERTa (configuration_bert.py, configuration_roberta.py, configuration_xlm_roberta.py,
 * transformers 5.17): one encoder's configuration. RoBERTa's defaults are BERT's but the padding token (1) and
 * the vocabulary; the published checkpoints have 514 positions and one token type, and its position ids start
 * after the padding token.
 */
function resolveEncoder(raw: Record<string, unknown>, modelType: BertConfig['modelType']): BertConfig {
  const model = { bert: 'Bert', roberta: 'Roberta', 'xlm-roberta': 'XLMRoberta' }[modelType];
  const classifier = `${model}ForSequenceClassification`;
  const tokenClassifier = `${model}ForTokenClassification`;
  checkArchitectures(raw, model, [`${model}ForMaskedLM`, classifier, tokenClassifier]);
  const architecture = firstArchitecture(raw);
  const hidden = int(raw, 'hidden_size', 768);
  const hiddenDropout = prob(raw, 'hidden_dropout_prob', 0.1);
  const heads = int(raw, 'num_attention_heads', 12);
  if (hidden % heads !== 0) throw new InputError(`${WHERE}.hidden_size`, `must be divisible by num_attention_heads (${heads})`);
  const maxPositions = int(raw, 'max_position_embeddings', 512);
  let positionOffset = 0;
  if (modelType !== 'bert') {
    const pad = padTokenId(raw, 1)!;
    if (maxPositions <= pad + 1) throw new InputError(`${WHERE}.max_position_embeddings`, `must be more than pad_token_id + 1 (${pad + 1}): RoBERTa's position ids start there`);
    positionOffset = pad + 1;
  }
  return {
    family: 'bert',
    modelType,
    vocabSize: int(raw, 'vocab_size', modelType === 'roberta' ? 50265 : 30522),
    hidden,
    layers: int(raw, 'num_hidden_layers', 12),
    heads,
    intermediate: int(raw, 'intermediate_size', 3072),
    activation: activation(raw, 'hidden_act', 'gelu'),
    hiddenDropout,
    attentionDropout: prob(raw, 'attention_probs_dropout_prob', 0.1),
    maxPositions,
    typeVocabSize: int(raw, 'type_vocab_size', 2),
    tieWordEmbeddings: bool(raw, 'tie_word_embeddings', true),
    head: architecture === classifier ? sequenceClassification(raw, hiddenDropout)
      : architecture === tokenClassifier ? { kind: 'token_classification', numLabels: labelCount(raw), dropout: prob(raw, 'classifier_dropout', hiddenDropout), bias: true }
      : { kind: 'masked_lm' },
    positionOffset,
  };
}

/**
 * Phi3RotaryEmbedding turns `int(head_dim * partial_rotary_factor)` dimensions; the factor comes from
 * `rope_parameters`, the older `rope_scaling`, or the top level (configuration_phi3.py convert_rope_params_to_dict).
 */
function phi3RotaryDim(raw: Record<string, unknown>, headDim: number): number {
  const fromDict = (key: string) => {
    const d = read(raw, key);
    return d && typeof d === 'object' ? (d as Record<string, unknown>).partial_rotary_factor : undefined;
  };
  const factor = fromDict('rope_parameters') ?? fromDict('rope_scaling') ?? read(raw, 'partial_rotary_factor') ?? 1;
  if (typeof factor !== 'number' || factor <= 0 || factor > 1) throw new InputError(`${WHERE}.partial_rotary_factor`, `must be a number in (0, 1], got ${JSON.stringify(factor)}`);
  const dim = Math.floor(headDim * factor);
  if (dim % 2 !== 0) throw new InputError(`${WHERE}.partial_rotary_factor`, `turns ${dim} dimensions of each head; the rotary embedding needs an even number`);
  return dim;
}

/**
 * The pretraining length a `longrope` config compares the sequence with (null: another rope type). The type comes
 * from `rope_scaling` or `rope_parameters` (`rope_type`, or the older `type`; Phi3Config renames the older Phi-3
 * configs' "su" and "yarn" to "longrope"). The length as transformers 5's standardize_rope_params sets it: the
 * config's `original_max_position_embeddings` where the config has one (Phi3Config always does: 4096 unless given),
 * else the rope dict's, else `max_position_embeddings`.
 */
function longropeOriginalMax(raw: Record<string, unknown>): number | null {
  const dictKey = ['rope_scaling', 'rope_parameters'].find((k) => {
    const d = read(raw, k);
    return d !== null && typeof d === 'object';
  });
  const dict = dictKey ? (read(raw, dictKey) as Record<string, unknown>) : null;
  const type = dict?.rope_type ?? dict?.type;
  const phi3 = read(raw, 'model_type') === 'phi3';
  if (!dict || !(type === 'longrope' || (phi3 && (type === 'su' || type === 'yarn')))) return null;
  const topLevel = read(raw, 'original_max_position_embeddings');
  const [where, length] =
    topLevel !== undefined && topLevel !== null ? ['original_max_position_embeddings', topLevel]
    : phi3 ? ['original_max_position_embeddings', 4096]
    : dict.original_max_position_embeddings !== undefined ? [`${dictKey}.original_max_position_embeddings`, dict.original_max_position_embeddings]
    : ['max_position_embeddings', read(raw, 'max_position_embeddings')];
  if (typeof length !== 'number' || !Number.isInteger(length) || length < 1) {
    throw new InputError(`${WHERE}.${where}`, `a longrope config needs its pretraining length, a positive whole number; got ${JSON.stringify(length)}`);
  }
  return length;
}

export function resolveHfConfig(raw: Record<string, unknown>): HfConfig {
  const modelType = read(raw, 'model_type');
  if (typeof modelType !== 'string') throw new InputError(`${WHERE}.model_type`, 'is required: the config.json of a Hugging Face model names its model_type');
  // a model type memplan does not simulate is said first: removing its quantization_config would not help
  if (!HF_MODEL_TYPES.includes(modelType) && modelType !== 'gemma3') throw new InputError(`${WHERE}.model_type`, `"${modelType}" is not simulated yet; simulated: ${HF_MODEL_TYPES.join(', ')}`);
  if (read(raw, 'quantization_config') !== undefined && read(raw, 'quantization_config') !== null) {
    // QLoRA and other quantized bases: bitsandbytes (or GPTQ/AWQ kernels, or fp8) decide that memory, and none is modelled.
    throw new InputError(`${WHERE}.quantization_config`, 'quantized weights (bitsandbytes 4-bit or 8-bit, GPTQ, AWQ, fp8) are not modelled: memplan simulates fp32, bf16 and fp16 weights; remove quantization_config to plan the unquantized model');
  }
  problemType(raw);
  switch (modelType) {
    case 'gpt2': {
      checkArchitectures(raw, 'GPT2', ['GPT2LMHeadModel']);
      const hidden = int(raw, 'n_embd', 768);
      const heads = int(raw, 'n_head', 12);
      if (hidden % heads !== 0) throw new InputError(`${WHERE}.n_embd`, `must be divisible by n_head (${heads})`);
      return {
        family: 'gpt2',
        modelType,
        vocabSize: int(raw, 'vocab_size', 50257),
        positions: int(raw, 'n_positions', 1024),
        hidden,
        layers: int(raw, 'n_layer', 12),
        heads,
        inner: int(raw, 'n_inner', 4 * hidden),
        activation: activation(raw, 'activation_function', 'gelu_new'),
        residDropout: prob(raw, 'resid_pdrop', 0.1),
        embdDropout: prob(raw, 'embd_pdrop', 0.1),
        attnDropout: prob(raw, 'attn_pdrop', 0.1),
        useCache: bool(raw, 'use_cache', true),
      };
    }
    case 'llama':
    case 'mistral':
    case 'qwen2':
    case 'qwen3':
    case 'phi3': {
      // configuration_*.py defaults (transformers 5.17)
      const defaults = {
        llama: { vocab: 32000, hidden: 4096, intermediate: 11008, layers: 32, heads: 32, kv: null, positions: 2048, headDim: null },
        mistral: { vocab: 32000, hidden: 4096, intermediate: 14336, layers: 32, heads: 32, kv: 8, positions: 4096 * 32, headDim: null },
        qwen2: { vocab: 151936, hidden: 4096, intermediate: 22016, layers: 32, heads: 32, kv: 32, positions: 32768, headDim: null },
        qwen3: { vocab: 151936, hidden: 4096, intermediate: 22016, layers: 32, heads: 32, kv: 32, positions: 32768, headDim: 128 },
        phi3: { vocab: 32064, hidden: 3072, intermediate: 8192, layers: 32, heads: 32, kv: null, positions: 4096, headDim: null },
      }[modelType];
      const model = { llama: 'Llama', mistral: 'Mistral', qwen2: 'Qwen2', qwen3: 'Qwen3', phi3: 'Phi3' }[modelType];
      // sequence and token classifiers: GenericForSequenceClassification and GenericForTokenClassification, the same
      // code for every decoder
      const classifier = `${model}ForSequenceClassification`;
      checkArchitectures(raw, model, decoderArchitectures(modelType, model));
      const { hidden, heads, kvHeads, headDim } = attentionShape(raw, defaults.hidden, defaults.heads, defaults.kv, defaults.headDim);
      const usesWindow = modelType === 'mistral' || modelType === 'phi3' || ((modelType === 'qwen2' || modelType === 'qwen3') && bool(raw, 'use_sliding_window', false));
      const windowDefault = modelType === 'phi3' ? null : 4096;
      const window = usesWindow ? (read(raw, 'sliding_window') === undefined ? windowDefault : read(raw, 'sliding_window')) : null;
      return {
        family: 'llama',
        modelType,
        vocabSize: int(raw, 'vocab_size', defaults.vocab),
        hidden,
        intermediate: int(raw, 'intermediate_size', defaults.intermediate),
        layers: int(raw, 'num_hidden_layers', defaults.layers),
        heads,
        kvHeads,
        headDim,
        maxPositions: int(raw, 'max_position_embeddings', defaults.positions),
        activation: activation(raw, 'hidden_act', 'silu'),
        attentionBias: modelType === 'llama' || modelType === 'qwen3' ? bool(raw, 'attention_bias', false) : false,
        qkvBias: modelType === 'qwen2',
        mlpBias: modelType === 'llama' ? bool(raw, 'mlp_bias', false) : false,
        attentionDropout: prob(raw, 'attention_dropout', 0),
        tieWordEmbeddings: bool(raw, 'tie_word_embeddings', false),
        slidingWindow: typeof window === 'number' ? window : null,
        useCache: bool(raw, 'use_cache', true),
        qkNorm: modelType === 'qwen3',
        fusedProjections: modelType === 'phi3',
        residDropout: modelType === 'phi3' ? prob(raw, 'resid_pdrop', 0) : 0,
        rotaryDim: modelType === 'phi3' ? phi3RotaryDim(raw, headDim) : headDim,
        noRopeLayers: [],
        longropeOriginalMax: longropeOriginalMax(raw),
        normAfter: false,
        moe: null,
        head: decoderHead(raw, classifier, tokenClassifierOf(modelType, model)),
      };
    }
    case 'mixtral':
      return resolveMixtral(raw);
    case 'qwen3_moe':
      return resolveQwen3Moe(raw);
    case 'smollm3':
      return resolveSmolLM3(raw);
    case 'olmo2':
      return resolveOlmo2(raw);
    case 'gemma2':
    case 'gemma3_text':
      return resolveGemma(raw, modelType);
    case 'gemma3':
      // Gemma3ForConditionalGeneration (modeling_gemma3.py): create_causal_mask_mapping raises "`token_type_ids` is
      // required as a model input when training" for model(input_ids=ids, labels=ids), and the SigLIP vision tower
      // and projector load with it: not the text model. Gemma3ForCausalLM trains the text_config alone.
      throw new InputError(`${WHERE}.model_type`, '"gemma3" is Gemma3ForConditionalGeneration (text and vision), which transformers does not train from input_ids and labels alone (it requires token_type_ids) and which is not simulated: paste its text_config, with "model_type": "gemma3_text", to plan Gemma3ForCausalLM (the text model alone)');
    case 'bert':
      return resolveEncoder(raw, 'bert');
    case 'roberta':
    case 'xlm-roberta':
      return resolveEncoder(raw, modelType);
    default:
      throw new InputError(`${WHERE}.model_type`, `"${modelType}" is not simulated yet; simulated: ${HF_MODEL_TYPES.join(', ')}`);
  }
}

function optionalPositive(raw: Record<string, unknown>, key: string, fallback: number | null): number | null {
  const v = read(raw, key);
  if (v === undefined) return fallback;
  if (v === null) return null;
  if (typeof v !== 'number' || !(v > 0)) throw new InputError(`${WHERE}.${key}`, `must be a positive number or null, got ${JSON.stringify(v)}`);
  return v;
}

/**
 * Gemma2Config and Gemma3TextConfig (transformers 5.x configuration_gemma2.py, configuration_gemma3.py): their
 * defaults, and `layer_types` when the config.json has none: Gemma 2 alternates from a sliding layer
 * (`"sliding_attention" if bool((i + 1) % 2)`), Gemma 3 makes every `sliding_window_pattern`-th layer (default 6)
 * global.
 */
function resolveGemma(raw: Record<string, unknown>, modelType: 'gemma2' | 'gemma3_text'): GemmaConfig {
  const g3 = modelType === 'gemma3_text';
  const classifier = g3 ? 'Gemma3TextForSequenceClassification' : 'Gemma2ForSequenceClassification';
  const model = g3 ? 'Gemma3Text' : 'Gemma2';
  const tokenClassifier = tokenClassifierOf(modelType, model);
  checkArchitectures(raw, model, decoderArchitectures(modelType, model, g3 ? 'Gemma3ForCausalLM' : 'Gemma2ForCausalLM'));
  if (g3 && bool(raw, 'use_bidirectional_attention', false)) {
    throw new InputError(`${WHERE}.use_bidirectional_attention`, 'bidirectional Gemma 3 (EmbeddingGemma) is not simulated: memplan trains the causal language model');
  }
  const hidden = int(raw, 'hidden_size', 2304);
  const heads = int(raw, 'num_attention_heads', 8);
  const kvHeads = int(raw, 'num_key_value_heads', 4);
  if (heads % kvHeads !== 0) throw new InputError(`${WHERE}.num_key_value_heads`, `must divide num_attention_heads (${heads})`);
  const layers = int(raw, 'num_hidden_layers', 26);
  const headDim = int(raw, 'head_dim', 256);
  if (headDim % 2 !== 0) throw new InputError(`${WHERE}.head_dim`, `must be even: the rotary embedding turns pairs of dimensions, got ${headDim}`);
  const pattern = int(raw, 'sliding_window_pattern', g3 ? 6 : 2);
  const given = read(raw, 'layer_types');
  let layerTypes: GemmaLayerType[];
  if (given === undefined || given === null) {
    layerTypes = Array.from({ length: layers }, (_, i) => ((i + 1) % pattern !== 0 ? 'sliding_attention' : 'full_attention'));
  } else {
    if (!Array.isArray(given) || given.length !== layers || given.some((t) => t !== 'sliding_attention' && t !== 'full_attention')) {
      throw new InputError(`${WHERE}.layer_types`, `must list "sliding_attention" or "full_attention" for each of the ${layers} layers`);
    }
    layerTypes = given as GemmaLayerType[];
  }
  return {
    family: 'gemma',
    modelType,
    vocabSize: int(raw, 'vocab_size', g3 ? 262208 : 256000),
    hidden,
    intermediate: int(raw, 'intermediate_size', 9216),
    layers,
    heads,
    kvHeads,
    headDim,
    maxPositions: int(raw, 'max_position_embeddings', g3 ? 131072 : 8192),
    activation: activation(raw, 'hidden_activation', 'gelu_pytorch_tanh'),
    attentionBias: bool(raw, 'attention_bias', false),
    attentionDropout: prob(raw, 'attention_dropout', 0),
    tieWordEmbeddings: bool(raw, 'tie_word_embeddings', true),
    slidingWindow: int(raw, 'sliding_window', 4096),
    layerTypes,
    attnSoftcap: optionalPositive(raw, 'attn_logit_softcapping', g3 ? null : 50),
    finalSoftcap: optionalPositive(raw, 'final_logit_softcapping', g3 ? null : 30),
    useCache: bool(raw, 'use_cache', true),
    qkNorm: g3,
    head: decoderHead(raw, classifier, tokenClassifier),
  };
}

/**
 * What the Llama-family variants below (Mixtral, SmolLM3, OLMo 2, Qwen3-MoE) read alike from a config.json, and
 * Llama's own layer wherever a variant keeps it; each variant's literal sets what differs after it.
 */
function llamaFamilyFields(raw: Record<string, unknown>, headDim: number) {
  return {
    activation: activation(raw, 'hidden_act', 'silu'),
    attentionDropout: prob(raw, 'attention_dropout', 0),
    useCache: bool(raw, 'use_cache', true),
    qkvBias: false,
    fusedProjections: false,
    residDropout: 0,
    rotaryDim: headDim,
    noRopeLayers: [] as number[],
    longropeOriginalMax: longropeOriginalMax(raw),
    normAfter: false,
  };
}

/**
 * MixtralConfig (transformers 5.x configuration_mixtral.py): Mistral's attention (head_dim hidden_size //
 * num_attention_heads unless given, 8 key-value heads, no window unless `sliding_window` is set) with a sparse
 * mixture of `num_local_experts` experts, `num_experts_per_tok` of them per token, in place of the MLP.
 * `output_router_logits` (false by default) makes MixtralForCausalLM add the router's load-balancing loss over
 * every layer's logits (`load_balancing_loss_func`; without it the aux loss is not computed at all): not simulated
 * yet, refused; so is `router_jitter_noise` (0 in the published models: an `empty_like(...).uniform_()` multiplier
 * a layer, which its in-place mul would save).
 */
function resolveMixtral(raw: Record<string, unknown>): LlamaConfig {
  checkArchitectures(raw, 'Mixtral', decoderArchitectures('mixtral', 'Mixtral'));
  checkMoeTraining(raw, 'MixtralForCausalLM');
  const jitter = read(raw, 'router_jitter_noise');
  if (jitter !== undefined && jitter !== null && jitter !== 0) {
    if (typeof jitter !== 'number' || jitter < 0) throw new InputError(`${WHERE}.router_jitter_noise`, `must be a number of at least 0, got ${JSON.stringify(jitter)}`);
    throw new InputError(`${WHERE}.router_jitter_noise`, `router jitter noise (${jitter}) is not simulated yet: the published Mixtral models train with 0`);
  }
  const { hidden, heads, kvHeads, headDim } = attentionShape(raw, 4096, 32, 8, null);
  const experts = int(raw, 'num_local_experts', 8);
  const topK = int(raw, 'num_experts_per_tok', 2);
  if (topK > experts) throw new InputError(`${WHERE}.num_experts_per_tok`, `must be at most num_local_experts (${experts}), got ${topK}`);
  const layers = int(raw, 'num_hidden_layers', 32);
  const window = read(raw, 'sliding_window');
  const intermediate = int(raw, 'intermediate_size', 14336);
  return {
    ...llamaFamilyFields(raw, headDim),
    family: 'llama',
    modelType: 'mixtral',
    vocabSize: int(raw, 'vocab_size', 32000),
    hidden,
    intermediate,
    layers,
    heads,
    kvHeads,
    headDim,
    maxPositions: int(raw, 'max_position_embeddings', 4096 * 32),
    attentionBias: false,
    mlpBias: false,
    tieWordEmbeddings: bool(raw, 'tie_word_embeddings', false),
    slidingWindow: window === undefined || window === null ? null : int(raw, 'sliding_window', null),
    qkNorm: false,
    moe: { experts, topK, intermediate, kind: 'mixtral', normTopK: true, denseLayers: [] },
    head: decoderHead(raw, 'MixtralForSequenceClassification', tokenClassifierOf('mixtral', 'Mixtral')),
  };
}

/**
 * SmolLM3Config (transformers 5.17 configuration_smollm3.py; modeling_smollm3.py read on the GPU machine): Llama's
 * model and layers, but the attention of the layers where `no_rope_layers[i]` is 0 applies no rotary embedding
 * (NoPE; by default every `no_rope_layer_interval`-th layer, 4). `__post_init__` makes a NoPE layer a
 * "sliding_attention" one when `use_sliding_window` and a `sliding_window` are set, and the model gives every
 * sliding layer the sliding mask (a `layer_types` given is taken as it is): not simulated yet, refused (the published
 * model has none).
 */
function resolveSmolLM3(raw: Record<string, unknown>): LlamaConfig {
  checkArchitectures(raw, 'SmolLM3', decoderArchitectures('smollm3', 'SmolLM3'));
  // num_key_value_heads: 4 by default, the attention heads when the config gives null (`__post_init__`)
  const { hidden, heads, kvHeads, headDim } = attentionShape(raw, 2048, 16, read(raw, 'num_key_value_heads') === null ? null : 4, null);
  const layers = int(raw, 'num_hidden_layers', 36);
  const flags = read(raw, 'no_rope_layers');
  const interval = int(raw, 'no_rope_layer_interval', 4);
  if (flags !== undefined && flags !== null && (!Array.isArray(flags) || flags.length < layers || !flags.every((f) => f === 0 || f === 1))) {
    throw new InputError(`${WHERE}.no_rope_layers`, `must be a list of 0 (no rotary embedding) and 1, at least one per layer (${layers}), got ${JSON.stringify(flags)}`);
  }
  const usesRope = (i: number) => (Array.isArray(flags) ? flags[i] === 1 : (i + 1) % interval !== 0);
  const given = read(raw, 'layer_types');
  if (given !== undefined && given !== null) {
    if (!Array.isArray(given) || given.length < layers || !given.every((k) => k === 'sliding_attention' || k === 'full_attention')) {
      throw new InputError(`${WHERE}.layer_types`, `must list "sliding_attention" or "full_attention" for each of the ${layers} layers`);
    }
    if (given.slice(0, layers).includes('sliding_attention')) {
      throw new InputError(`${WHERE}.layer_types`, 'the sliding window of SmolLM3\'s sliding_attention layers is not simulated yet: the published model has none');
    }
  } else if (bool(raw, 'use_sliding_window', false) && read(raw, 'sliding_window') !== null && read(raw, 'sliding_window') !== undefined) {
    if (Array.from({ length: layers }, (_, i) => i).some((i) => !usesRope(i))) {
      throw new InputError(`${WHERE}.use_sliding_window`, 'the sliding window of SmolLM3\'s NoPE layers is not simulated yet: the published model has none (use_sliding_window false)');
    }
  }
  return {
    ...llamaFamilyFields(raw, headDim),
    family: 'llama',
    modelType: 'smollm3',
    vocabSize: int(raw, 'vocab_size', 128256),
    hidden,
    intermediate: int(raw, 'intermediate_size', 11008),
    layers,
    heads,
    kvHeads,
    headDim,
    maxPositions: int(raw, 'max_position_embeddings', 32768),
    attentionBias: bool(raw, 'attention_bias', false),
    mlpBias: bool(raw, 'mlp_bias', false),
    tieWordEmbeddings: bool(raw, 'tie_word_embeddings', true),
    slidingWindow: null,
    qkNorm: false,
    noRopeLayers: Array.from({ length: layers }, (_, i) => i).filter((i) => !usesRope(i)),
    moe: null,
    head: decoderHead(raw, 'SmolLM3ForSequenceClassification', tokenClassifierOf('smollm3', 'SmolLM3')),
  };
}

/**
 * Olmo2Config (transformers 5.17 configuration_olmo2.py; modeling_olmo2.py read on the GPU machine): Llama's model
 * with OLMo 2's layer and rotary embedding (LlamaConfig.normAfter).
 */
function resolveOlmo2(raw: Record<string, unknown>): LlamaConfig {
  checkArchitectures(raw, 'Olmo2', decoderArchitectures('olmo2', 'Olmo2'));
  const { hidden, heads, kvHeads, headDim } = attentionShape(raw, 4096, 32, null, null);
  return {
    ...llamaFamilyFields(raw, headDim),
    family: 'llama',
    modelType: 'olmo2',
    vocabSize: int(raw, 'vocab_size', 50304),
    hidden,
    intermediate: int(raw, 'intermediate_size', 11008),
    layers: int(raw, 'num_hidden_layers', 32),
    heads,
    kvHeads,
    headDim,
    maxPositions: int(raw, 'max_position_embeddings', 2048),
    attentionBias: bool(raw, 'attention_bias', false),
    mlpBias: false,
    tieWordEmbeddings: bool(raw, 'tie_word_embeddings', false),
    slidingWindow: null,
    qkNorm: true,
    normAfter: true,
    moe: null,
    head: decoderHead(raw, 'Olmo2ForSequenceClassification', tokenClassifierOf('olmo2', 'Olmo2')),
  };
}

/**
 * What both mixture-of-experts models refuse: the router's load-balancing loss (`output_router_logits`, false by
 * default: the ForCausalLM then adds `load_balancing_loss_func` over every layer's logits; without it the aux loss
 * is not computed at all), and an experts implementation other than grouped_mm.
 */
function checkMoeTraining(raw: Record<string, unknown>, model: string): void {
  if (bool(raw, 'output_router_logits', false)) {
    throw new InputError(`${WHERE}.output_router_logits`, `the router load-balancing loss (output_router_logits: true) is not simulated yet: memplan trains ${model} with its default false, the loss of the language model alone`);
  }
  // PretrainedConfig pops `experts_implementation` from the config (None: get_correct_experts_implementation picks
  // grouped_mm, what memplan simulates); the per-expert loop ("eager", whose memory depends on routing) and the
  // others are not simulated
  const impl = read(raw, 'experts_implementation');
  if (impl !== undefined && impl !== null && impl !== 'grouped_mm') {
    throw new InputError(`${WHERE}.experts_implementation`, `${JSON.stringify(impl)} is not simulated yet: memplan simulates transformers' default, "grouped_mm" (remove the key to plan it)`);
  }
}

/**
 * Qwen3MoeConfig (transformers 5.17 configuration_qwen3_moe.py; modeling_qwen3_moe.py read on the GPU machine):
 * Qwen3's attention (per-head q/k RMSNorm; head_dim from the config.json when it has one, as the published models
 * do, else hidden_size // num_attention_heads; a sliding window only with use_sliding_window) and Mixtral's model,
 * experts and ForCausalLM (the same code) with its own router (MoeConfig.kind) and `moe_intermediate_size` experts.
 * A layer's MLP is the sparse block unless the layer is in `mlp_only_layers` or `(layer + 1) % decoder_sparse_step`
 * is not 0: then a dense Qwen3MoeMLP of `intermediate_size`. Defaults are the configuration's (norm_topk_prob
 * false, 128 experts, 8 a token); the published models set norm_topk_prob true.
 */
function resolveQwen3Moe(raw: Record<string, unknown>): LlamaConfig {
  checkArchitectures(raw, 'Qwen3Moe', decoderArchitectures('qwen3_moe', 'Qwen3Moe'));
  checkMoeTraining(raw, 'Qwen3MoeForCausalLM');
  const { hidden, heads, kvHeads, headDim } = attentionShape(raw, 2048, 32, 4, null);
  // attribute_map: `num_experts` is stored as `num_local_experts`; a config.json may give either
  const experts = int(raw, 'num_experts', int(raw, 'num_local_experts', 128));
  const topK = int(raw, 'num_experts_per_tok', 8);
  if (topK > experts) throw new InputError(`${WHERE}.num_experts_per_tok`, `must be at most num_experts (${experts}), got ${topK}`);
  const layers = int(raw, 'num_hidden_layers', 24);
  const sparseStep = int(raw, 'decoder_sparse_step', 1);
  const mlpOnly = read(raw, 'mlp_only_layers');
  if (mlpOnly !== undefined && mlpOnly !== null && (!Array.isArray(mlpOnly) || !mlpOnly.every((i) => Number.isInteger(i)))) {
    throw new InputError(`${WHERE}.mlp_only_layers`, `must be a list of layer indices, got ${JSON.stringify(mlpOnly)}`);
  }
  const dense = new Set<number>((mlpOnly as number[] | null | undefined) ?? []);
  const denseLayers = Array.from({ length: layers }, (_, i) => i).filter((i) => dense.has(i) || (i + 1) % sparseStep !== 0);
  // `__post_init__`: sliding_window (4096 by default; null: none) only with use_sliding_window
  const window = bool(raw, 'use_sliding_window', false) && read(raw, 'sliding_window') !== null ? int(raw, 'sliding_window', 4096) : null;
  return {
    ...llamaFamilyFields(raw, headDim),
    family: 'llama',
    modelType: 'qwen3_moe',
    vocabSize: int(raw, 'vocab_size', 151936),
    hidden,
    intermediate: int(raw, 'intermediate_size', 6144),
    layers,
    heads,
    kvHeads,
    headDim,
    maxPositions: int(raw, 'max_position_embeddings', 32768),
    attentionBias: bool(raw, 'attention_bias', false),
    mlpBias: false,
    tieWordEmbeddings: bool(raw, 'tie_word_embeddings', false),
    slidingWindow: window,
    qkNorm: true,
    // every layer dense (a decoder_sparse_step past the layers): no mixture of experts at all
    moe: denseLayers.length === layers ? null : { experts, topK, intermediate: int(raw, 'moe_intermediate_size', 768), kind: 'qwen3_moe', normTopK: bool(raw, 'norm_topk_prob', false), denseLayers },
    head: decoderHead(raw, 'Qwen3MoeForSequenceClassification', tokenClassifierOf('qwen3_moe', 'Qwen3Moe')),
  };
}
