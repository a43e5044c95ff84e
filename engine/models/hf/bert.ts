/**
 * BERT's encoder with its heads (transformers 5.x modeling_bert.py): `BertForMaskedLM` trained as
 * `model(input_ids=ids, labels=ids).loss`, `BertForSequenceClassification` (the pooler, dropout, the
 * classifier) as `model(input_ids=ids, labels=labels).loss` on the labels its problem_type takes, or
 * `BertForTokenClassification` (dropout, the classifier on every token) on one class id per token; and RoBERTa and
 * XLM-RoBERTa (modeling_roberta.py, modeling_xlm_roberta.py: their embeddings and heads, below).
 * BertForMaskedLM's parameters in `Module._apply` order: embeddings (word, position, token type, LayerNorm) and
 * their buffers position_ids and token_type_ids (int64 [1, max_positions]); per layer query, key, value,
 * attention.output.dense, attention.output.LayerNorm, intermediate.dense, output.dense, output.LayerNorm; the
 * head's transform dense and LayerNorm, then the decoder's bias (the head's `bias`, moved on its first visit); the
 * decoder weight is the word embedding (tied). No pooler. No mask is built without an attention mask; the loss is
 * `CrossEntropyLoss()` on the logits as they are (no fp32 upcast).
 * LoRA: every `nn.Linear` of the encoder and of the head's transform can be a target (PEFT's default for bert:
 * `query` and `value`), as models/peft/lora.ts runs it; the decoder, tied to the word embedding, is not adapted
 * here. With checkpointing, `enable_input_require_grads` hooks the word embedding's output.
 */
import { embedding } from '../../ops/embedding.ts';
import { addTensors, tanh } from '../../ops/elementwise.ts';
import { linear } from '../../ops/linear.ts';
import { crossEntropy } from '../../ops/loss.ts';
import { layerNorm } from '../../ops/norm.ts';
import { dropout } from '../../ops/pointwise.ts';
import type { Runtime } from '../../ops/runtime.ts';
import type { DType } from '../../tensor/dtype.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type { ParameterSpec, TrainableModel } from '../model.ts';
import { attend, gradCopies, splitHeads } from './attention.ts';
import { classificationLoss, headInputs, hfActivation } from './common.ts';
import type { BertConfig } from './config.ts';
import type { HfModelOptions } from './gpt2.ts';
import { runBlocks } from '../checkpointing.ts';
import type { BlockReuse } from '../block-reuse.ts';
import { FULL_FINE_TUNING, InputsRequireGrad, linearModules, linearParameters } from '../peft/lora.ts';

export function bertModel(cfg: BertConfig, options: HfModelOptions): TrainableModel {
  const { dtype, seqLen, checkpointing } = options;
  const tuning = options.tuning ?? FULL_FINE_TUNING;
  // RoBERTa and XLM-RoBERTa: BERT's encoder under `roberta`, position ids counted from the padding token, their
  // own heads (RobertaLMHead, RobertaClassificationHead)
  const roberta = cfg.modelType !== 'bert';
  const base = roberta ? 'roberta' : 'bert';
  const e = cfg.hidden;
  const heads = cfg.heads;
  const headDim = e / heads;
  const params: ParameterSpec[] = [];
  const p = (name: string, shape: number[], d: DType = dtype, buffer = false) => params.push({ name, shape, dtype: d, buffer });
  /** An `nn.Linear` with a bias, and the LoRA adapter PEFT adds after it when it is a target. */
  const dense = (name: string, out: number, inp: number) => params.push(...linearParameters(name, out, inp, true, dtype, tuning));
  const norm = (name: string) => {
    p(`${name}.weight`, [e]);
    p(`${name}.bias`, [e]);
  };
  // XLMRobertaForMaskedLM registers lm_head before roberta: named_parameters() meets the tied word embedding first
  // as the decoder's weight, and names it so (measured: h100_lora_targets.json)
  const headFirstTied = cfg.modelType === 'xlm-roberta' && cfg.tieWordEmbeddings && cfg.head.kind !== 'sequence_classification' && cfg.head.kind !== 'token_classification';
  const wordEmbeddings = headFirstTied ? 'lm_head.decoder.weight' : `${base}.embeddings.word_embeddings.weight`;
  p(wordEmbeddings, [cfg.vocabSize, e]);
  // RobertaEmbeddings registers its position embeddings (with a padding index) after the LayerNorm (measured)
  if (!roberta) p(`${base}.embeddings.position_embeddings.weight`, [cfg.maxPositions, e]);
  p(`${base}.embeddings.token_type_embeddings.weight`, [cfg.typeVocabSize, e]);
  norm(`${base}.embeddings.LayerNorm`);
  if (roberta) p(`${base}.embeddings.position_embeddings.weight`, [cfg.maxPositions, e]);
  p(`${base}.embeddings.position_ids`, [1, cfg.maxPositions], 'int64', true);
  p(`${base}.embeddings.token_type_ids`, [1, cfg.maxPositions], 'int64', true);
  for (let i = 0; i < cfg.layers; i++) {
    const l = `${base}.encoder.layer.${i}`;
    dense(`${l}.attention.self.query`, e, e);
    dense(`${l}.attention.self.key`, e, e);
    dense(`${l}.attention.self.value`, e, e);
    dense(`${l}.attention.output.dense`, e, e);
    norm(`${l}.attention.output.LayerNorm`);
    dense(`${l}.intermediate.dense`, cfg.intermediate, e);
    dense(`${l}.output.dense`, e, cfg.intermediate);
    norm(`${l}.output.LayerNorm`);
  }
  const classifier = cfg.head.kind === 'sequence_classification' ? cfg.head : null;
  const tokenClassifier = cfg.head.kind === 'token_classification' ? cfg.head : null;
  let optimizerOrder: string[] | undefined;
  /**
   * XLM-RoBERTa's ForMaskedLM, ForSequenceClassification and ForTokenClassification register their head before
   * `roberta` (measured: the head's weights reach the GPU first): the parameters from `bodyEnd` on move to the front.
   */
  const headFirst = (bodyEnd: number) => {
    if (cfg.modelType === 'xlm-roberta') params.unshift(...params.splice(bodyEnd));
  };
  if (classifier) {
    // BertModel's pooler, then the classifier (RoBERTa: no pooler; RobertaClassificationHead's dense and out_proj);
    // under LoRA, PEFT's SEQ_CLS task keeps the classifier trainable as `modules_to_save`: the original module
    // frozen (named here as before PEFT wrapped it, as `training.freeze` patterns see it), then its copy
    // (deep-copied: the model's dtype), which trains
    if (!roberta) dense(`${base}.pooler.dense`, e, e);
    const n = classifier.numLabels;
    const head = (prefix: string, savedModule?: 'SEQ_CLS') => {
      const linearOf = (name: string, out: number) => params.push({ name: `${name}.weight`, shape: [out, e], dtype, savedModule }, { name: `${name}.bias`, shape: [out], dtype, savedModule });
      if (roberta) {
        linearOf(`${prefix}.dense`, e);
        linearOf(`${prefix}.out_proj`, n);
      } else linearOf(prefix, n);
    };
    const bodyEnd = params.length;
    head('classifier');
    if (tuning.lora) head('classifier.modules_to_save.default', 'SEQ_CLS');
    headFirst(bodyEnd);
  } else if (tokenClassifier) {
    // BertForTokenClassification (and RoBERTa's): no pooler, the classifier on every token; under LoRA, PEFT's
    // TOKEN_CLS task keeps it trainable as `modules_to_save`, as for a sequence classifier
    const bodyEnd = params.length;
    const linearOf = (prefix: string, savedModule?: 'TOKEN_CLS') =>
      params.push({ name: `${prefix}.weight`, shape: [tokenClassifier.numLabels, e], dtype, savedModule }, { name: `${prefix}.bias`, shape: [tokenClassifier.numLabels], dtype, savedModule });
    linearOf('classifier');
    if (tuning.lora) linearOf('classifier.modules_to_save.default', 'TOKEN_CLS');
    headFirst(bodyEnd);
  } else if (roberta) {
    // RobertaLMHead: dense, layer_norm, decoder (tied: the word embedding, moved here when the head comes first;
    // its bias the head's `bias`, moved on the decoder's visit)
    const word = headFirstTied ? params.splice(0, 1)[0]! : null;
    const bodyEnd = params.length;
    dense('lm_head.dense', e, e);
    norm('lm_head.layer_norm');
    if (!cfg.tieWordEmbeddings) p('lm_head.decoder.weight', [cfg.vocabSize, e]);
    else if (word) params.push(word); // the decoder's weight is the word embedding
    p('lm_head.bias', [cfg.vocabSize]);
    headFirst(bodyEnd);
    // named_parameters: lm_head's own bias comes before its children's parameters
    const trainable = params.filter((x) => !x.buffer).map((x) => x.name);
    const head = trainable.indexOf('lm_head.dense.weight');
    optimizerOrder = [...trainable.slice(0, head), 'lm_head.bias', ...trainable.slice(head).filter((n) => n !== 'lm_head.bias')];
  } else {
    dense('cls.predictions.transform.dense', e, e);
    norm('cls.predictions.transform.LayerNorm');
    p('cls.predictions.bias', [cfg.vocabSize]);
    if (!cfg.tieWordEmbeddings) p('cls.predictions.decoder.weight', [cfg.vocabSize, e]);
    // named_parameters: cls.predictions' own bias comes before its transform's parameters
    const trainable = params.filter((x) => !x.buffer).map((x) => x.name);
    const head = trainable.indexOf('cls.predictions.transform.dense.weight');
    optimizerOrder = [...trainable.slice(0, head), 'cls.predictions.bias', ...trainable.slice(head).filter((n) => n !== 'cls.predictions.bias')];
  }
  const classifierPath = tuning.lora ? 'classifier.modules_to_save.default' : 'classifier';
  const maskedLm = !classifier && !tokenClassifier;
  const decoder = roberta ? 'lm_head.decoder' : 'cls.predictions.decoder';
  // a tied module's weight read by the module's own name (TrainableModel.tiedWeights): a modules_to_save copy of the
  // word embedding runs in the embedding only, the decoder keeping the frozen original
  const wordEmbeddingsWeight = `${base}.embeddings.word_embeddings.weight`;
  const tiedWeights: Record<string, string> = !maskedLm || !cfg.tieWordEmbeddings ? {} : headFirstTied ? { [wordEmbeddingsWeight]: wordEmbeddings } : { [`${decoder}.weight`]: wordEmbeddings };
  const decoderWeight = `${decoder}.weight`;
  const weights = new Map<string, Tensor>();
  const w = (name: string) => weights.get(name)!;
  /** Each layer's parameters' names (read once the list is final: a head may have moved to the front). */
  let layerNames: string[][] | null = null;
  // Note [Reused blocks]: every encoder layer runs the same code on the same shapes
  const reuse: BlockReuse = {
    kind: () => 'BertLayer',
    name: (i) => `${base}.encoder.layer.${i}`,
    weights: (i) => {
      layerNames ??= Array.from({ length: cfg.layers }, (_, l) => params.filter((spec) => spec.name.startsWith(`${base}.encoder.layer.${l}.`)).map((spec) => spec.name));
      return layerNames[i]!.map(w);
    },
  };
  /** `module(x)` for the nn.Linear at `path`: with its LoRA adapter when it has one. */
  const lin = linearModules(weights, tuning.lora);
  const inputsRequireGrad = InputsRequireGrad.of(tuning, checkpointing);

  /** BertSelfAttention.forward: (attn_output, attn_weights); eager attention's weights, null for SDPA. */
  function selfAttention(rt: Runtime, x: Tensor, i: number): [Tensor, Tensor | null] {
    const { cuda } = rt;
    const a = `${base}.encoder.layer.${i}.attention.self`;
    const call = { impl: options.attention, device: options.device, dropoutP: cfg.attentionDropout, mask: null, kvContiguous: false, softmaxFp32: false, probsCast: 'none' as const, label: `${a} attention` };
    const qp = lin(rt, x, `${a}.query`);
    // Eager attention gives k its gradient transposed ([B*H, D, T] through k^T): the heads' view takes it back, but
    // key's own Linear then copies it to flatten it (the `view(-1, in)` of `_flatten_nd_linear`), where GPT-2's cat of
    // q, k and v grads and Llama's rotary embedding make a contiguous one. Modelled as the heads' copy: the same
    // requests in the same order (measured: lora_bert_base_amp_fp16_qv_eager).
    const copies = { ...gradCopies(qp, call), ...(options.attention === 'eager' ? { k: true } : {}) };
    const q = splitHeads(rt, qp, heads, headDim, copies.q, `${a} query`);
    cuda.release(qp);
    const kp = lin(rt, x, `${a}.key`);
    const k = splitHeads(rt, kp, heads, headDim, copies.k, `${a} key`);
    cuda.release(kp);
    const vp = lin(rt, x, `${a}.value`);
    const v = splitHeads(rt, vp, heads, headDim, copies.v, `${a} value`);
    cuda.release(vp);
    const { out, weights: attnWeights } = attend(rt, q, k, v, call);
    for (const t of [q, k, v]) cuda.release(t);
    return [out, attnWeights];
  }

  /** BertSelfOutput / BertOutput: `LayerNorm(dropout(dense(h)) + input_tensor)`. */
  function output(rt: Runtime, h: Tensor, input: Tensor, name: string): Tensor {
    const { cuda } = rt;
    const d = lin(rt, h, `${name}.dense`);
    const dropped = dropout(rt, d, cfg.hiddenDropout, `${name}.dropout`);
    cuda.release(d);
    const sum = addTensors(rt, dropped, input, `${name} hidden + input`);
    const out = layerNorm(rt, sum, w(`${name}.LayerNorm.weight`), w(`${name}.LayerNorm.bias`), `${name}.LayerNorm`);
    // one statement: `hidden_states` is rebound once LayerNorm returned, then the sum (a temporary) dies
    cuda.release(dropped);
    cuda.release(sum);
    return out;
  }

  function layer(rt: Runtime, x: Tensor, i: number): Tensor {
    const { cuda } = rt;
    const l = `${base}.encoder.layer.${i}`;
    // `self_attention_output, _ = self.attention(...)`: `_` holds eager attention's weights until the layer returns
    const [ctx, attnWeights] = selfAttention(rt, x, i);
    const attnOut = output(rt, ctx, x, `${l}.attention.output`);
    cuda.release(ctx);
    const inter = lin(rt, attnOut, `${l}.intermediate.dense`);
    const act = hfActivation(rt, cfg.activation, inter, `${l}.intermediate.act`);
    cuda.release(inter);
    const out = output(rt, act, attnOut, `${l}.output`);
    cuda.release(act);
    cuda.release(attnOut);
    cuda.release(attnWeights);
    return out;
  }

  /** BertPooler: `dense(hidden_states[:, 0])`, then tanh. */
  function pooler(rt: Runtime, hidden: Tensor): Tensor {
    const { cuda, autograd } = rt;
    const [b, , h] = hidden.shape as [number, number, number];
    // `hidden_states[:, 0]`: a view; SelectBackward0 builds a zero tensor of the hidden states' shape and copies in
    const first = cuda.view(hidden, [b, h]);
    autograd.record('SelectBackward0', [hidden], [first], [], ([grad]) => [grad ? cuda.empty(hidden.shape, grad.dtype, 'grad of hidden_states[:, 0]') : null]);
    const pooledDense = lin(rt, first, `${base}.pooler.dense`);
    cuda.release(first);
    const pooled = tanh(rt, pooledDense, `${base}.pooler.activation`);
    cuda.release(pooledDense);
    return pooled;
  }

  /**
   * The embeddings' common end, BERT's and RoBERTa's alike: `embeddings + position_embeddings(position_ids)` (the
   * sum before it dying), LayerNorm, dropout.
   */
  function positionNormDropout(rt: Runtime, sum1: Tensor, positions: Tensor): { embedded: Tensor; positionEmbeds: Tensor } {
    const { cuda } = rt;
    const positionEmbeds = embedding(rt, w(`${base}.embeddings.position_embeddings.weight`), positions, `${base}.embeddings.position_embeddings`);
    const sum2 = addTensors(rt, sum1, positionEmbeds, 'embeddings + position_embeddings');
    cuda.release(sum1);
    const normed = layerNorm(rt, sum2, w(`${base}.embeddings.LayerNorm.weight`), w(`${base}.embeddings.LayerNorm.bias`), `${base}.embeddings.LayerNorm`);
    cuda.release(sum2);
    const embedded = dropout(rt, normed, cfg.hiddenDropout, `${base}.embeddings.dropout`);
    cuda.release(normed);
    return { embedded, positionEmbeds };
  }

  /** BertEmbeddings.forward: word, token type and position embeddings summed, LayerNorm, dropout. */
  function bertEmbeddings(rt: Runtime, ids: Tensor): Tensor {
    const { cuda } = rt;
    const [b, t] = ids.shape as [number, number];
    // BertEmbeddings: token types gathered from the buffer ([1, T] int64), expanded to [B, T]
    const tokenTypes = cuda.empty([1, t], 'int64', 'token_type_ids (gathered)', 'input');
    const tokenTypesExpanded = cuda.view(tokenTypes, [b, t]);
    const inputsEmbeds = embedding(rt, w(wordEmbeddingsWeight), ids, `${base}.embeddings.word_embeddings`);
    inputsRequireGrad?.hook(rt, inputsEmbeds);
    // at::embedding reshapes the expanded indices to [B*T]: a copy, dead once index_select ran
    const flatTypes = b > 1 ? cuda.empty([b * t], 'int64', 'token_type_ids.reshape(-1)', 'temporary') : null;
    const typeEmbeds = embedding(rt, w(`${base}.embeddings.token_type_embeddings.weight`), tokenTypesExpanded, `${base}.embeddings.token_type_embeddings`, b === 1);
    cuda.release(flatTypes);
    const sum1 = addTensors(rt, inputsEmbeds, typeEmbeds, 'inputs_embeds + token_type_embeddings');
    const positions = cuda.view(w(`${base}.embeddings.position_ids`), [1, t]);
    const { embedded, positionEmbeds } = positionNormDropout(rt, sum1, positions);
    // BertEmbeddings.forward returns: its locals die
    for (const x of [positionEmbeds, positions, typeEmbeds, inputsEmbeds, tokenTypesExpanded, tokenTypes]) cuda.release(x);
    return embedded;
  }

  /**
   * RobertaEmbeddings.forward (transformers 5.17): position ids counted from the padding token
   * (`create_position_ids_from_input_ids`: `mask = input_ids.ne(padding_idx).int()`, `(cumsum(mask,
   * dim=1).type_as(mask) + past) * mask`, `.long() + padding_idx`: each step a new [B, T] tensor, the one before
   * dying), token types gathered from the buffer at those positions (`torch.gather`: [B, T]), then as BERT: word,
   * token type and position embeddings summed, LayerNorm, dropout. Measured: roberta_base_*, xlm_roberta_base_*.
   */
  function robertaEmbeddings(rt: Runtime, ids: Tensor): Tensor {
    const { cuda } = rt;
    const [b, t] = ids.shape as [number, number];
    const step = (dtype: DType, what: string, previous: Tensor | null) => {
      const next = cuda.empty([b, t], dtype, `position ids: ${what}`, 'temporary');
      cuda.release(previous);
      return next;
    };
    const notPad = cuda.empty([b, t], 'bool', 'position ids: input_ids.ne(padding_idx)', 'temporary');
    const mask = step('int32', 'mask (.int())', notPad);
    // cumsum of int32 gives int64: its result, then the input cast to int64 for the scan (a temporary)
    const cumsum = cuda.empty([b, t], 'int64', 'position ids: cumsum(mask)', 'temporary');
    cuda.release(cuda.empty([b, t], 'int64', 'position ids: cumsum(mask): mask as int64', 'temporary'));
    let x = step('int32', '.type_as(mask)', cumsum);
    x = step('int32', '+ past_key_values_length', x);
    // `incremental_indices`, a local until the function returns
    const incremental = step('int32', '* mask', x);
    const long = cuda.empty([b, t], 'int64', 'position ids: .long()', 'temporary');
    const positions = cuda.empty([b, t], 'int64', 'position ids: + padding_idx', 'temporary');
    for (const y of [long, mask, incremental]) cuda.release(y);
    const tokenTypes = cuda.empty([b, t], 'int64', 'token_type_ids (gathered)', 'input');
    const inputsEmbeds = embedding(rt, w(wordEmbeddingsWeight), ids, `${base}.embeddings.word_embeddings`);
    inputsRequireGrad?.hook(rt, inputsEmbeds);
    const typeEmbeds = embedding(rt, w(`${base}.embeddings.token_type_embeddings.weight`), tokenTypes, `${base}.embeddings.token_type_embeddings`);
    const sum1 = addTensors(rt, inputsEmbeds, typeEmbeds, 'inputs_embeds + token_type_embeddings');
    const { embedded, positionEmbeds } = positionNormDropout(rt, sum1, positions);
    // RobertaEmbeddings.forward returns: its locals die
    for (const y of [positionEmbeds, typeEmbeds, inputsEmbeds, tokenTypes, positions]) cuda.release(y);
    return embedded;
  }

  /**
   * RobertaClassificationHead: `features[:, 0, :]`, dropout, dense, tanh, dropout, out_proj (the copy PEFT trains
   * under LoRA: no adapters inside it).
   */
  function robertaClassifier(rt: Runtime, hidden: Tensor, dropoutP: number): Tensor {
    const { cuda, autograd } = rt;
    const [b, , h] = hidden.shape as [number, number, number];
    const first = cuda.view(hidden, [b, h]);
    autograd.record('SelectBackward0', [hidden], [first], [], ([grad]) => [grad ? cuda.empty(hidden.shape, grad.dtype, 'grad of features[:, 0, :]') : null]);
    const d1 = dropout(rt, first, dropoutP, 'classifier.dropout');
    cuda.release(first);
    const x1 = linear(rt, d1, w(`${classifierPath}.dense.weight`), w(`${classifierPath}.dense.bias`), 'classifier.dense');
    cuda.release(d1);
    const x2 = tanh(rt, x1, 'classifier tanh');
    cuda.release(x1);
    const d2 = dropout(rt, x2, dropoutP, 'classifier.dropout');
    cuda.release(x2);
    const logits = linear(rt, d2, w(`${classifierPath}.out_proj.weight`), w(`${classifierPath}.out_proj.bias`), 'classifier.out_proj');
    cuda.release(d2);
    return logits;
  }

  return {
    parameters: params,
    optimizerOrder,
    tiedModules: headFirstTied ? [`${base}.embeddings.word_embeddings`] : maskedLm && cfg.tieWordEmbeddings ? [decoder] : [],
    tiedWeights,
    inputEmbeddings: `${base}.embeddings.word_embeddings`,
    // a masked LM's decoder: its bias is the head's `bias` (listed there), and its weight the word embedding when
    // tied; XLM-RoBERTa's word embedding is listed as the decoder's weight. modules_to_save does not copy them here
    uncopiedModules: maskedLm ? [decoder, ...(headFirstTied ? [`${base}.embeddings.word_embeddings`] : [])] : [],
    // the embeddings' dropout; each layer's dropouts and activation; the heads' (BERT's masked LM transform and
    // pooler activations, a classifier's dropout; RobertaLMHead calls gelu as a function)
    parameterlessModules: [
      `${base}.embeddings.dropout`,
      ...Array.from({ length: cfg.layers }, (_, i) => ['attention.self.dropout', 'attention.output.dropout', 'intermediate.intermediate_act_fn', 'output.dropout'].map((m) => `${base}.encoder.layer.${i}.${m}`)).flat(),
      ...(classifier ? (roberta ? ['classifier.dropout'] : [`${base}.pooler.activation`, 'dropout']) : tokenClassifier ? ['dropout'] : roberta ? [] : ['cls.predictions.transform.transform_act_fn']),
    ],
    tensors: weights,
    makeInputs: (rt, batch) => headInputs(rt, batch, seqLen, cfg.head),
    loss(rt, [ids, labels]) {
      const { cuda } = rt;
      const [b, t] = ids!.shape as [number, number];
      const embedded = roberta ? robertaEmbeddings(rt, ids!) : bertEmbeddings(rt, ids!);
      // BertModel.forward keeps `embedding_output` until it returns
      const hidden = runBlocks(rt, cuda.ref(embedded), cfg.layers, checkpointing, (x, i) => layer(rt, x, i), [], reuse);
      if (classifier && roberta) {
        // RobertaModel has no pooler; its output holds the hidden states until the classifier's forward returns
        cuda.release(embedded);
        const logits = robertaClassifier(rt, hidden, classifier.dropout);
        const loss = classificationLoss(rt, logits, labels!, classifier);
        cuda.release(logits);
        cuda.release(hidden);
        return loss;
      }
      if (tokenClassifier) {
        // BertModel (no pooler) returns. BertForTokenClassification: dropout, the classifier on every token,
        // CrossEntropyLoss on logits.view(-1, num_labels) and labels.view(-1) (views). As it returns, its locals die
        // in the order they were first assigned: `outputs` (the hidden states), `sequence_output` (the dropout's,
        // which under autocast nothing saves: the classifier keeps its bf16 cast); the output object holds the
        // logits until `.loss` is read (measured on the H100)
        cuda.release(embedded);
        const dropped = dropout(rt, hidden, tokenClassifier.dropout, 'dropout');
        const logits = linear(rt, dropped, w(`${classifierPath}.weight`), w(`${classifierPath}.bias`), 'classifier');
        const flat = rt.autograd.view('ViewBackward0', logits, [b * t, tokenClassifier.numLabels]);
        const target = cuda.view(labels!, [b * t]);
        const loss = crossEntropy(rt, flat, target);
        cuda.release(target);
        cuda.release(flat);
        cuda.release(hidden);
        cuda.release(dropped);
        cuda.release(logits);
        return loss;
      }
      if (classifier) {
        // BertModel.forward runs the pooler before it returns; its output holds the hidden states until the
        // classifier's forward returns
        const pooled = pooler(rt, hidden);
        cuda.release(embedded);
        // BertForSequenceClassification: dropout, the classifier, its loss on [B, num_labels]
        const dropped = dropout(rt, pooled, classifier.dropout, 'dropout');
        cuda.release(pooled);
        const logits = linear(rt, dropped, w(`${classifierPath}.weight`), w(`${classifierPath}.bias`), 'classifier');
        cuda.release(dropped);
        const loss = classificationLoss(rt, logits, labels!, classifier);
        cuda.release(logits);
        cuda.release(hidden);
        return loss;
      }
      cuda.release(embedded);
      // BertLMPredictionHead: transform (dense, act, LayerNorm), decoder; RobertaLMHead: dense, gelu, layer_norm,
      // decoder
      const transform = roberta ? 'lm_head' : 'cls.predictions.transform';
      const h1 = lin(rt, hidden, `${transform}.dense`);
      const h2 = hfActivation(rt, roberta ? 'gelu' : cfg.activation, h1, `${transform}.act`);
      cuda.release(h1);
      const norm = roberta ? 'lm_head.layer_norm' : 'cls.predictions.transform.LayerNorm';
      const h3 = layerNorm(rt, h2, w(`${norm}.weight`), w(`${norm}.bias`), norm);
      cuda.release(h2);
      const logits = linear(rt, h3, w(decoderWeight), w(roberta ? 'lm_head.bias' : 'cls.predictions.bias'), roberta ? 'lm_head.decoder' : 'cls.predictions.decoder');
      cuda.release(h3);
      const flat = rt.autograd.view('ViewBackward0', logits, [b * t, cfg.vocabSize]);
      const loss = crossEntropy(rt, flat, ids!);
      cuda.release(flat);
      cuda.release(hidden);
      cuda.release(logits);
      return loss;
    },
    releaseGraph(rt) {
      inputsRequireGrad?.releaseGraph(rt);
    },
  };
}
