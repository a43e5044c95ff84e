/**
 * Pieces every Hugging Face model here shares (transformers 5.x): `ACT2FN` activations, the causal-LM loss
 * (`loss/loss_utils.py` ForCausalLMLoss), the classifier heads' tails and losses (sequence classification as
 * `problem_type` says, token classification), and the model's inputs as memplan's measurement script makes them
 * (`torch.randint(vocab, (B, T))`, used as `input_ids` and `labels`; a classifier's labels after them).
 */
import { indexPutAccumulateScratch, indexRows } from '../../ops/indexing.ts';
import { bceWithLogitsLoss, crossEntropy, mseLoss } from '../../ops/loss.ts';
import { activation as pointwiseActivation, dropout } from '../../ops/pointwise.ts';
import { addScalar, addTensors, mul, mulScalar, powScalar, tanh, toDType } from '../../ops/elementwise.ts';
import { copy } from '../../ops/matmul.ts';
import type { Runtime } from '../../ops/runtime.ts';
import type { DType } from '../../tensor/dtype.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type { ParameterSpec } from '../model.ts';
import { linear } from '../../ops/linear.ts';
import { checkClassifierBatch, type DecoderSequenceClassifierHead, type HfActivation, type SequenceClassifierHead, type TokenClassifierHead } from './config.ts';

/**
 * `ACT2FN[name](x)`. gelu/relu/silu and gelu_pytorch_tanh are one kernel each; gelu_new is NewGELUActivation's
 * Python composite `0.5 * x * (1.0 + tanh(sqrt(2/pi) * (x + 0.044715 * pow(x, 3.0))))`, evaluated left to right
 * with each intermediate freed as soon as the next op consumed it (pow is on autocast's fp32 list, so under
 * autocast the rest runs in fp32).
 */
export function hfActivation(rt: Runtime, kind: HfActivation, x: Tensor, label: string): Tensor {
  switch (kind) {
    case 'gelu':
    case 'gelu_pytorch_tanh':
      return pointwiseActivation(rt, 'gelu', x, label);
    case 'relu':
      return pointwiseActivation(rt, 'relu', x, label);
    case 'silu':
      return pointwiseActivation(rt, 'silu', x, label);
    case 'gelu_new':
      return geluNew(rt, x, label);
  }
}

function geluNew(rt: Runtime, x: Tensor, label: string): Tensor {
  const { cuda } = rt;
  const half = mulScalar(rt, x, `${label}: 0.5 * x`);
  const cube = powScalar(rt, x, 3, `${label}: pow(x, 3)`);
  const scaledCube = mulScalar(rt, cube, `${label}: 0.044715 * x^3`);
  cuda.release(cube);
  const inner = addTensors(rt, x, scaledCube, `${label}: x + 0.044715 * x^3`);
  cuda.release(scaledCube);
  const scaled = mulScalar(rt, inner, `${label}: sqrt(2/pi) * (...)`);
  cuda.release(inner);
  const t = tanh(rt, scaled, `${label}: tanh`);
  cuda.release(scaled);
  const onePlus = addScalar(rt, t, `${label}: 1 + tanh`);
  cuda.release(t);
  const out = mul(rt, half, onePlus, label);
  cuda.release(onePlus);
  cuda.release(half);
  return out;
}

/**
 * ForCausalLMLoss with `labels = input_ids`: `logits.float()`; labels padded with -100 to [B, T+1]; the shifted
 * labels made contiguous ([B, T]: a copy unless B is 1); `cross_entropy(logits.view(-1, V), shift_labels.view(-1), ignore_index=-100)`.
 * The fp32 logits and the padded labels are locals that die when it returns.
 */
export function causalLmLoss(rt: Runtime, logits: Tensor, ids: Tensor): Tensor {
  const { cuda, autograd } = rt;
  const [b, t, v] = logits.shape as [number, number, number];
  const upcast = toDType(rt, logits, 'float32', 'logits.float()');
  const padded = cuda.empty([b, t + 1], 'int64', 'labels padded with -100', 'input');
  // `labels[..., 1:].contiguous()`: with one sequence the slice is contiguous already (a size-1 dimension's
  // stride does not count), a view (measured: phi3_4l_amp_bf16_s2048_window_efficient)
  const shifted = b === 1 ? cuda.view(padded, [b, t]) : copy(rt, padded, [b, t], 'shift_labels');
  const flat = autograd.view('ViewBackward0', upcast, [b * t, v]);
  const loss = crossEntropy(rt, flat, shifted);
  cuda.release(flat);
  cuda.release(shifted);
  cuda.release(padded);
  cuda.release(upcast);
  return loss;
}

/** One micro-batch: `torch.randint(vocab, (B, T))`, used as input_ids and labels. */
export function tokenInputs(rt: Runtime, batch: number, seqLen: number): Tensor[] {
  return [rt.cuda.empty([batch, seqLen], 'int64', 'input_ids', 'input')];
}

/**
 * A sequence classifier's micro-batch: the ids, then its labels as a DataCollator gives them: one class id per
 * sequence (`torch.randint(num_labels, (B,))`), else float32, one per sequence for a regression on one label, else
 * [B, num_labels].
 */
export function classifiedInputs(rt: Runtime, batch: number, seqLen: number, head: SequenceClassifierHead): Tensor[] {
  const [ids] = tokenInputs(rt, batch, seqLen);
  const labels = head.problem === 'single_label_classification'
    ? rt.cuda.empty([batch], 'int64', 'labels', 'input')
    : rt.cuda.empty(head.problem === 'regression' && head.numLabels === 1 ? [batch] : [batch, head.numLabels], 'float32', 'labels', 'input');
  return [ids!, labels];
}

/** A model's micro-batch for its head: the ids, then a classifier's labels. */
export function headInputs(rt: Runtime, batch: number, seqLen: number, head: { kind: 'causal_lm' | 'masked_lm' } | SequenceClassifierHead | TokenClassifierHead): Tensor[] {
  if (head.kind === 'sequence_classification') return classifiedInputs(rt, batch, seqLen, head);
  if (head.kind === 'token_classification') return tokenClassifiedInputs(rt, batch, seqLen);
  return tokenInputs(rt, batch, seqLen);
}

/** A token classifier's micro-batch: the ids, then one class id per token (`torch.randint(num_labels, (B, T))`). */
export function tokenClassifiedInputs(rt: Runtime, batch: number, seqLen: number): Tensor[] {
  const [ids] = tokenInputs(rt, batch, seqLen);
  return [ids!, rt.cuda.empty([batch, seqLen], 'int64', 'labels', 'input')];
}

/**
 * The sequence-classification loss on logits [B, num_labels] (transformers' ForSequenceClassificationLoss, and
 * BERT's and RoBERTa's own copies of it): CrossEntropyLoss on class ids; MSELoss, on `logits.squeeze()` and
 * `labels.squeeze()` (views) for one label; BCEWithLogitsLoss.
 */
export function classificationLoss(rt: Runtime, logits: Tensor, labels: Tensor, head: SequenceClassifierHead): Tensor {
  if (head.problem === 'single_label_classification') return crossEntropy(rt, logits, labels);
  if (head.problem === 'multi_label_classification') return bceWithLogitsLoss(rt, logits, labels);
  if (head.numLabels > 1) return mseLoss(rt, logits, labels);
  const squeezed = (t: Tensor) => t.shape.filter((d) => d !== 1);
  const input = rt.autograd.view('SqueezeBackward0', logits, squeezed(logits));
  const target = rt.cuda.view(labels, squeezed(labels));
  const loss = mseLoss(rt, input, target);
  rt.cuda.release(target);
  rt.cuda.release(input);
  return loss;
}

/**
 * A decoder classifier's `score` (nn.Linear: no bias for a sequence classifier, a bias for a token classifier unless
 * `token_classification_bias` is false) and, under LoRA, PEFT's SEQ_CLS or TOKEN_CLS `modules_to_save` copy of it
 * (the model's dtype, after the frozen original, which keeps its name as `training.freeze` patterns see it): the
 * parameters, and the weight and bias the forward reads.
 */
function scoreParameters(numLabels: number, hidden: number, dtype: DType, lora: boolean, bias: boolean, task: 'SEQ_CLS' | 'TOKEN_CLS'): { params: ParameterSpec[]; weight: string; bias: string | null } {
  const module = (prefix: string, savedModule?: 'SEQ_CLS' | 'TOKEN_CLS'): ParameterSpec[] => [
    { name: `${prefix}.weight`, shape: [numLabels, hidden], dtype, savedModule },
    ...(bias ? [{ name: `${prefix}.bias`, shape: [numLabels], dtype, savedModule }] : []),
  ];
  const trained = lora ? 'score.modules_to_save.default' : 'score';
  return { params: [...module('score'), ...(lora ? module(trained, task) : [])], weight: `${trained}.weight`, bias: bias ? `${trained}.bias` : null };
}

/**
 * A decoder's classifier head, if it has one (a sequence or a token classifier), and its `score` parameters
 * (`scoreParameters`); null for the causal LM.
 */
export function decoderClassifierHeads(head: { kind: 'causal_lm' } | DecoderSequenceClassifierHead | TokenClassifierHead, hidden: number, dtype: DType, lora: boolean) {
  const classifier = head.kind === 'sequence_classification' ? head : null;
  const tokenClassifier = head.kind === 'token_classification' ? head : null;
  const numLabels = (classifier ?? tokenClassifier)?.numLabels;
  const score = numLabels === undefined ? null : scoreParameters(numLabels, hidden, dtype, lora, tokenClassifier?.bias ?? false, tokenClassifier ? 'TOKEN_CLS' : 'SEQ_CLS');
  return { classifier, tokenClassifier, score };
}

/**
 * GenericForTokenClassification's tail, from the model's final hidden states: dropout, `score` on every token, and
 * ForTokenClassification's loss (`logits.view(-1, num_labels)`, `labels.view(-1)`, `logits.float()`, then
 * cross_entropy; its locals die as it returns). As the forward returns, its locals die in the order first assigned:
 * `outputs` (the hidden states, then the cache), `sequence_output` (the dropout's output, which under autocast
 * nothing saves: `score` keeps its cast); then the output object with the logits, once `.loss` is read.
 */
export function decoderTokenClassifierLoss(rt: Runtime, hidden: Tensor, scoreWeight: Tensor, scoreBias: Tensor | null, labels: Tensor, head: TokenClassifierHead, cache: Tensor[]): Tensor {
  const { cuda, autograd } = rt;
  const dropped = dropout(rt, hidden, head.dropout, 'dropout');
  const logits = linear(rt, dropped, scoreWeight, scoreBias, 'score');
  const [b, t, n] = logits.shape as [number, number, number];
  const flat = autograd.view('ViewBackward0', logits, [b * t, n]);
  const target = cuda.view(labels, [b * t]);
  const upcast = toDType(rt, flat, 'float32', 'logits.float()');
  cuda.release(flat);
  const loss = crossEntropy(rt, upcast, target);
  cuda.release(upcast);
  cuda.release(target);
  cuda.release(hidden);
  for (const x of cache.splice(0)) cuda.release(x);
  cuda.release(dropped);
  cuda.release(logits);
  return loss;
}

/**
 * GenericForSequenceClassification's tail, from the model's final hidden states (which it consumes): `score` on every
 * position, the last token's logits and the loss (`lastTokenClassificationLoss`); then its frame's return
 * (hidden_states, logits, the locals) and the output object once `.loss` is read (pooled_logits, then
 * past_key_values: `cache`).
 */
export function decoderClassifierLoss(rt: Runtime, hidden: Tensor, scoreWeight: Tensor, labels: Tensor, head: DecoderSequenceClassifierHead, cache: Tensor[]): Tensor {
  const { cuda } = rt;
  const logits = linear(rt, hidden, scoreWeight, null, 'score');
  const { loss, pooled, locals } = lastTokenClassificationLoss(rt, logits, labels, head);
  cuda.release(hidden);
  cuda.release(logits);
  for (const x of locals) cuda.release(x);
  cuda.release(pooled);
  for (const x of cache.splice(0)) cuda.release(x);
  return loss;
}

/**
 * `GenericForSequenceClassification.forward` (transformers 5.x modeling_layers.py) from the score layer's logits
 * [B, T, num_labels] on: each sequence's last token, then `logits[arange(B), last_non_pad_token]` [B, num_labels]
 * (`lastNonPadLogits` with `pad_token_id`, `lastPositionLogits` without), and ForSequenceClassificationLoss on the
 * labels (`classificationLoss`). Returns the loss, the pooled logits (the output object's, dropped once `.loss` is
 * read) and the forward's locals in the order they die when it returns.
 */
export function lastTokenClassificationLoss(rt: Runtime, logits: Tensor, labels: Tensor, head: DecoderSequenceClassifierHead): { loss: Tensor; pooled: Tensor; locals: Tensor[] } {
  const [b] = logits.shape as [number, number, number];
  checkClassifierBatch(head, b);
  const { pooled, locals } = head.padded ? lastNonPadLogits(rt, logits) : lastPositionLogits(rt, logits);
  const loss = classificationLoss(rt, pooled, labels, head);
  return { loss, pooled, locals };
}

/**
 * With `pad_token_id`: the last token that is not padding, `(arange(T, int32) * (input_ids != pad_token_id)
 * .to(int32)).argmax(-1)`, then `logits[arange(B), last_non_pad_token]`, whose backward puts the gradient back into
 * a zero tensor of the logits' shape (IndexBackward0, index_put_ with accumulate and two index tensors). The locals
 * die in the order first assigned in the source (last_non_pad_token, non_pad_mask, token_indices).
 */
function lastNonPadLogits(rt: Runtime, logits: Tensor): { pooled: Tensor; locals: Tensor[] } {
  const { cuda, autograd } = rt;
  const [b, t, n] = logits.shape as [number, number, number];
  const notPad = cuda.empty([b, t], 'bool', 'input_ids != pad_token_id', 'temporary');
  const nonPadMask = cuda.empty([b, t], 'int32', 'non_pad_mask', 'temporary');
  cuda.release(notPad);
  const tokenIndices = cuda.empty([t], 'int32', 'token_indices', 'temporary');
  const product = cuda.empty([b, t], 'int32', 'token_indices * non_pad_mask', 'temporary');
  const lastNonPad = cuda.empty([b], 'int64', 'last_non_pad_token', 'temporary');
  cuda.release(product);
  const rows = cuda.empty([b], 'int64', 'arange(batch_size)', 'temporary');
  const pooled = cuda.empty([b, n], logits.dtype, 'pooled_logits', 'activation');
  // IndexBackward0 keeps the indices for its index_put_
  autograd.record('IndexBackward0', [logits], [pooled], [cuda.ref(rows), cuda.ref(lastNonPad)], ([grad]) => {
    if (!grad) return [null];
    const zeros = cuda.empty(logits.shape, grad.dtype, 'grad of logits[arange, last_non_pad_token]');
    indexPutAccumulateScratch(rt, b, b * t, 'grad of logits[arange, last_non_pad_token]', 2);
    return [zeros];
  });
  cuda.release(rows);
  return { pooled, locals: [lastNonPad, nonPadMask, tokenIndices] };
}

/**
 * Without `pad_token_id` (one sequence a batch): `last_non_pad_token = -1`, a Python int, so
 * `logits[arange(B), -1]` selects the last position first (a view; SelectBackward0 builds a zero tensor of the
 * logits' shape and copies in) and indexes its rows with the arange (IndexBackward0: zeros [B, num_labels] and
 * index_put_ with accumulate). Nothing else is computed: no locals.
 */
function lastPositionLogits(rt: Runtime, logits: Tensor): { pooled: Tensor; locals: Tensor[] } {
  const { cuda, autograd } = rt;
  const [b, , n] = logits.shape as [number, number, number];
  const rows = cuda.empty([b], 'int64', 'arange(batch_size)', 'temporary');
  const last = cuda.view(logits, [b, n]);
  autograd.record('SelectBackward0', [logits], [last], [], ([grad]) => [grad ? cuda.empty(logits.shape, grad.dtype, 'grad of logits[:, -1] (select)') : null]);
  const pooled = indexRows(rt, last, rows, 'pooled_logits');
  cuda.release(last);
  cuda.release(rows);
  return { pooled, locals: [] };
}

/** `position_ids = torch.arange(T) + past_seen_tokens` (a new tensor; the arange dies), then `unsqueeze(0)`. */
export function positionIds(rt: Runtime, seqLen: number): Tensor {
  const arange = rt.cuda.empty([seqLen], 'int64', 'arange(T)', 'input');
  const positions = rt.cuda.empty([1, seqLen], 'int64', 'position_ids', 'input');
  rt.cuda.release(arange);
  return positions;
}
