/**
 * `Gemma2ForCausalLM` and `Gemma3ForCausalLM` (transformers 5.x modeling_gemma2.py, modeling_gemma3.py; Gemma 3's
 * text model is Gemma 2's with q/k norms and a rotary embedding per layer type) trained as
 * `model(input_ids=ids, labels=ids).loss`. Implemented from the source and checked against H100 recordings
 * (test/fixtures/calibration/gemma*, lora_gemma*: 4- and 6-layer cuts and the published Gemma 2 2B and Gemma 3 1B).
 *
 * Parameters in `Module._apply` order: embed_tokens (then its `embed_scale` buffer, a 0-dim tensor in the default
 * dtype of the model's construction), per layer self_attn (q, k, v, o projections; Gemma 3 then q_norm
 * and k_norm [head_dim]), mlp (gate, up, down), input_layernorm, post_attention_layernorm,
 * pre_feedforward_layernorm, post_feedforward_layernorm; norm; the rotary buffers (Gemma 2: inv_freq and
 * original_inv_freq; Gemma 3: both for each layer type, `{type}_inv_freq` with its own base: rope_local_base_freq
 * for sliding layers, rope_theta for global ones: the same size); lm_head unless tied (the published models tie it).
 *
 * Forward (Gemma2Model.forward, which Gemma3TextModel follows): the embedding; position ids; the two masks
 * (`create_causal_mask` for global layers, `create_sliding_window_causal_mask` for sliding ones); the rotary cos/sin
 * (Gemma 3: one pair per kind of layer in `config.layer_types`, `set(...)` of them); the layers; the final norm;
 * lm_head; the final logit soft-capping; ForCausalLMLoss. Both scale the embedding inside the embedding module.
 * Gemma2ForSequenceClassification and Gemma3TextForSequenceClassification, and Gemma2ForTokenClassification, run
 * `score` instead of lm_head, without the soft-capping (common.ts `decoderClassifierLoss`, `decoderTokenClassifierLoss`).
 */
import { embedding } from '../../ops/embedding.ts';
import { addScalar, addTensors, meanLastDim, mul, mulScalar, powScalar, rsqrt, tanh, toDType } from '../../ops/elementwise.ts';
import { divScalar } from '../../ops/pointwise.ts';
import type { Runtime } from '../../ops/runtime.ts';
import type { DType } from '../../tensor/dtype.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type { ParameterSpec, TrainableModel } from '../model.ts';
import type { BlockReuse } from '../block-reuse.ts';
import { ReentrantClosures, runBlocks } from '../checkpointing.ts';
import { FULL_FINE_TUNING, InputsRequireGrad, linearModules, linearParameters, type FineTuning } from '../peft/lora.ts';
import { attend, cacheUpdate, eagerCausalMask, eagerSlidingWindowMask, findPackedSequenceIndices, gradCopies, repeatKv, slidingWindowMask, splitHeads } from './attention.ts';
import { causalLmLoss, decoderClassifierLoss, decoderClassifierHeads, decoderTokenClassifierLoss, headInputs, hfActivation, positionIds } from './common.ts';
import type { GemmaConfig, GemmaLayerType } from './config.ts';
import type { HfModelOptions } from './gpt2.ts';
import { applyRotary, rotaryCosSin } from './rotary.ts';

export function gemmaModel(cfg: GemmaConfig, options: HfModelOptions, tuning: FineTuning = FULL_FINE_TUNING): TrainableModel {
  const { dtype, seqLen, checkpointing } = options;
  const hd = cfg.headDim;
  const g3 = cfg.modelType === 'gemma3_text';
  const params: ParameterSpec[] = [];
  const p = (name: string, shape: number[], d: DType = dtype, buffer = false) => params.push({ name, shape, dtype: d, ...(buffer ? { buffer } : {}) });
  const lin = (path: string, out: number, inp: number, bias: boolean) => params.push(...linearParameters(path, out, inp, bias, dtype, tuning));
  p('model.embed_tokens.weight', [cfg.vocabSize, cfg.hidden]);
  // The scaled word embedding: `register_buffer("embed_scale", torch.tensor(embed_scale))`, made while
  // from_pretrained/from_config has set the default dtype to the model's: fp32 for fp32 and AMP, else bf16/fp16.
  // Gemma 2 has it too in transformers 5.17 (Gemma2Model: `Gemma2TextScaledWordEmbedding(...,
  // embed_scale=hidden_size**0.5)`): its recordings move a 2-byte tensor to the GPU right after the embedding's weight
  p('model.embed_tokens.embed_scale', [], dtype, true);
  /** Each layer's parameters, as [first, end) of `params` (Note [Reused blocks]: a layer's weights). */
  const layerParams: [number, number][] = [];
  for (let i = 0; i < cfg.layers; i++) {
    const first = params.length;
    const l = `model.layers.${i}`;
    lin(`${l}.self_attn.q_proj`, cfg.heads * hd, cfg.hidden, cfg.attentionBias);
    lin(`${l}.self_attn.k_proj`, cfg.kvHeads * hd, cfg.hidden, cfg.attentionBias);
    lin(`${l}.self_attn.v_proj`, cfg.kvHeads * hd, cfg.hidden, cfg.attentionBias);
    lin(`${l}.self_attn.o_proj`, cfg.hidden, cfg.heads * hd, cfg.attentionBias);
    if (cfg.qkNorm) {
      p(`${l}.self_attn.q_norm.weight`, [hd]);
      p(`${l}.self_attn.k_norm.weight`, [hd]);
    }
    lin(`${l}.mlp.gate_proj`, cfg.intermediate, cfg.hidden, false);
    lin(`${l}.mlp.up_proj`, cfg.intermediate, cfg.hidden, false);
    lin(`${l}.mlp.down_proj`, cfg.hidden, cfg.intermediate, false);
    for (const norm of ['input_layernorm', 'post_attention_layernorm', 'pre_feedforward_layernorm', 'post_feedforward_layernorm']) p(`${l}.${norm}.weight`, [cfg.hidden]);
    layerParams.push([first, params.length]);
  }
  p('model.norm.weight', [cfg.hidden]);
  // the rotary buffers are fp32 whatever the model's dtype (`torch.arange(...).float()`)
  const ropeKinds: (GemmaLayerType | null)[] = g3 ? [...new Set(cfg.layerTypes)] : [null];
  const invFreqName = (kind: GemmaLayerType | null) => `model.rotary_emb.${kind ? `${kind}_` : ''}inv_freq`;
  for (const kind of ropeKinds) {
    p(invFreqName(kind), [hd / 2], 'float32', true);
    p(`model.rotary_emb.${kind ? `${kind}_` : ''}original_inv_freq`, [hd / 2], 'float32', true);
  }
  const { classifier, tokenClassifier, score } = decoderClassifierHeads(cfg.head, cfg.hidden, dtype, tuning.lora !== null);
  if (score) params.push(...score.params);
  else if (!cfg.tieWordEmbeddings) params.push(...linearParameters('lm_head', cfg.vocabSize, cfg.hidden, false, dtype, tuning, true)); // the output embeddings
  const weights = new Map<string, Tensor>();
  const w = (name: string) => weights.get(name)!;
  const proj = linearModules(weights, tuning.lora);
  // PeftModel.__init__ on a checkpointing model: enable_input_require_grads, the input embeddings module's output a
  // leaf (Gemma 3: the scaled embedding's output; Gemma 2: the lookup's, which the normalizer then multiplies)
  const inputsRequireGrad = InputsRequireGrad.of(tuning, checkpointing);
  const reentrantClosures = ReentrantClosures.of(checkpointing);
  const useCache = cfg.useCache && !checkpointing;
  /** The DynamicCache's keys and values of the current forward. */
  const cache: Tensor[] = [];
  // Note [Reused blocks]: sliding and global layers are two kinds, each of which runs one code on one shape
  const reuse: BlockReuse = {
    kind: (i) => cfg.layerTypes[i] ?? '',
    name: (i) => `model.layers.${i}`,
    weights: (i) => params.slice(...layerParams[i]!).map((spec) => w(spec.name)),
    kept: cache,
  };
  // create_sliding_window_causal_mask: SDPA gets no mask below the window (`_ignore_causal_mask_sdpa`), a boolean
  // one from the window on (the sliding layers only; global layers stay causal through is_causal)
  const windowMask = cfg.layerTypes.includes('sliding_attention') && seqLen >= cfg.slidingWindow;

  /**
   * Gemma2RMSNorm / Gemma3RMSNorm.forward: `output = self._norm(x.float())` with `_norm(x) = x *
   * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)`, then `output = output * (1.0 +
   * self.weight.float())` and `output.type_as(x)`. Everything in fp32: the upcast x (saved by pow and by the
   * first mul), the normalized x (saved by the weight's mul) and 1 + weight live until backward; the statement's
   * temporaries die as it ends, the upcast when `_norm` returns.
   */
  function rmsNorm(rt: Runtime, x: Tensor, weight: Tensor, label: string): Tensor {
    const { cuda } = rt;
    const up = toDType(rt, x, 'float32', `${label} x.float()`);
    const squared = powScalar(rt, up, 2, `${label} pow(2)`);
    const variance = meanLastDim(rt, squared, `${label} mean`);
    cuda.release(squared);
    const eps = addScalar(rt, variance, `${label} mean + eps`);
    cuda.release(variance);
    const inv = rsqrt(rt, eps, `${label} rsqrt`);
    cuda.release(eps);
    const normed = mul(rt, up, inv, `${label} x * rsqrt`);
    cuda.release(inv);
    cuda.release(up);
    const weight32 = toDType(rt, weight, 'float32', `${label} weight.float()`);
    const onePlus = addScalar(rt, weight32, `${label} 1 + weight`);
    cuda.release(weight32);
    const scaled = mul(rt, normed, onePlus, `${label} output * (1 + weight)`);
    cuda.release(onePlus);
    cuda.release(normed);
    const out = toDType(rt, scaled, x.dtype, `${label} type_as(x)`);
    cuda.release(scaled);
    return out;
  }

  /** Gemma2Attention.forward / Gemma3Attention.forward: (attn_output, attn_weights). */
  function attention(rt: Runtime, x: Tensor, i: number, cos: Tensor, sin: Tensor, mask: Tensor | null): [Tensor, Tensor | null] {
    const { cuda } = rt;
    const a = `model.layers.${i}.self_attn`;
    const sliding = cfg.layerTypes[i] === 'sliding_attention';
    const gqa = cfg.kvHeads !== cfg.heads;
    const call = { impl: options.attention, device: options.device, dropoutP: cfg.attentionDropout, mask, kvContiguous: useCache, softmaxFp32: true, probsCast: 'query' as const, gqa, softcap: cfg.attnSoftcap !== null, label: `${a} attention` };
    // as in Llama (measured there): the rotary embedding's rotate_half backward, a zero tensor in [B, H, T, D]
    // order, is the first gradient to reach q and k, so their head views copy it back; with a mask, repeat_kv's
    // backward sums v's gradient into a contiguous [B, KV, T, D] tensor
    const copies = { ...gradCopies({ dtype: rt.autocast?.dtype ?? x.dtype }, call), q: true, k: true };
    if (mask && options.attention === 'sdpa' && gqa) copies.v = true;
    // `self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)`: the projection lives as the view's base
    const headsOf = (path: string, heads: number, copy: boolean, label: string) => {
      const projected = proj(rt, x, path);
      const out = splitHeads(rt, projected, heads, hd, copy, label);
      cuda.release(projected);
      return out;
    };
    let q0 = headsOf(`${a}.q_proj`, cfg.heads, copies.q, `${a} query`);
    let k0 = headsOf(`${a}.k_proj`, cfg.kvHeads, copies.k, `${a} key`);
    let v = headsOf(`${a}.v_proj`, cfg.kvHeads, copies.v, `${a} value`);
    if (cfg.qkNorm) {
      // Gemma 3: `query_states = self.q_norm(query_states)` on the [B, H, T, D] view (after the transpose, unlike
      // Qwen3); the norm's fp32 copies keep the view's memory order
      const qn = rmsNorm(rt, q0, w(`${a}.q_norm.weight`), `${a}.q_norm`);
      cuda.release(q0);
      q0 = qn;
      const kn = rmsNorm(rt, k0, w(`${a}.k_norm.weight`), `${a}.k_norm`);
      cuda.release(k0);
      k0 = kn;
    }
    const cos4 = cuda.view(cos, [cos.shape[0]!, 1, ...cos.shape.slice(1)]);
    const sin4 = cuda.view(sin, [sin.shape[0]!, 1, ...sin.shape.slice(1)]);
    let q = applyRotary(rt, q0, cos4, sin4, `${a} query`);
    let k = applyRotary(rt, k0, cos4, sin4, `${a} key`);
    cuda.release(sin4);
    cuda.release(cos4);
    cuda.release(q0);
    cuda.release(k0);
    if (useCache) {
      // DynamicCache(config=...) makes a DynamicSlidingWindowLayer for each sliding layer (its first update
      // allocates an int64 scalar, measured for Mistral: phi3_4l_amp_bf16_adamw) and a DynamicLayer for global ones;
      // both keep cat copies of k and v until the model's output is dropped
      if (sliding) cache.push(cuda.empty([], 'int64', `${a} DynamicSlidingWindowLayer int64 scalar`, 'temporary'));
      const [kc, vc] = cacheUpdate(rt, k, v, a);
      cuda.release(k);
      cuda.release(v);
      k = kc;
      v = vc;
      cache.push(cuda.ref(k), cuda.ref(v));
    }
    let merged: { out: Tensor; weights: Tensor | null };
    if (options.attention === 'eager' && gqa) {
      // eager_attention_forward's repeat_kv (its locals): contiguous [B, H, T, D] copies, or views with one
      // key/value head
      const rk = repeatKv(rt, k, cfg.heads, `${a} key`);
      const rv = repeatKv(rt, v, cfg.heads, `${a} value`);
      merged = attend(rt, q, rk, rv, { ...call, kvContiguous: cfg.kvHeads !== 1, kvExpanded: cfg.kvHeads === 1 });
      cuda.release(rv);
      cuda.release(rk);
    } else {
      merged = attend(rt, q, k, v, call);
    }
    const out = proj(rt, merged.out, `${a}.o_proj`);
    cuda.release(merged.out);
    for (const t of [q, k, v]) cuda.release(t);
    return [out, merged.weights];
  }

  /** Gemma2MLP: `down_proj(act_fn(gate_proj(x)) * up_proj(x))`, gelu_pytorch_tanh by default. */
  function mlp(rt: Runtime, x: Tensor, i: number): Tensor {
    const { cuda } = rt;
    const m = `model.layers.${i}.mlp`;
    const gate = proj(rt, x, `${m}.gate_proj`);
    const act = hfActivation(rt, cfg.activation, gate, `${m}.act_fn`);
    cuda.release(gate);
    const up = proj(rt, x, `${m}.up_proj`);
    const prod = mul(rt, act, up, `${m} act(gate) * up`);
    cuda.release(up);
    cuda.release(act);
    const out = proj(rt, prod, `${m}.down_proj`);
    cuda.release(prod);
    return out;
  }

  /**
   * Gemma2DecoderLayer.forward: `input_layernorm`, attention, `post_attention_layernorm`, residual add;
   * `pre_feedforward_layernorm`, mlp, `post_feedforward_layernorm`, residual add. Each `hidden_states = ...`
   * rebinding frees the tensor it named unless autograd saved it.
   */
  function layer(rt: Runtime, x: Tensor, i: number, cos: Tensor, sin: Tensor, mask: Tensor | null): Tensor {
    const { cuda } = rt;
    const l = `model.layers.${i}`;
    const normed = rmsNorm(rt, x, w(`${l}.input_layernorm.weight`), `${l}.input_layernorm`);
    // `hidden_states, _ = self.self_attn(...)`: `_` holds eager attention's weights until the layer returns
    const [attnOut, weights] = attention(rt, normed, i, cos, sin, mask);
    cuda.release(normed);
    const postAttn = rmsNorm(rt, attnOut, w(`${l}.post_attention_layernorm.weight`), `${l}.post_attention_layernorm`);
    cuda.release(attnOut);
    const hidden = addTensors(rt, x, postAttn, `${l} residual + attention`);
    cuda.release(postAttn);
    const preMlp = rmsNorm(rt, hidden, w(`${l}.pre_feedforward_layernorm.weight`), `${l}.pre_feedforward_layernorm`);
    const mlpOut = mlp(rt, preMlp, i);
    cuda.release(preMlp);
    const postMlp = rmsNorm(rt, mlpOut, w(`${l}.post_feedforward_layernorm.weight`), `${l}.post_feedforward_layernorm`);
    cuda.release(mlpOut);
    const out = addTensors(rt, hidden, postMlp, `${l} residual + mlp`);
    cuda.release(postMlp);
    cuda.release(hidden);
    cuda.release(weights);
    return out;
  }

  /**
   * The masks as masking_utils builds them for this attention: SDPA without a window needs none; eager attention
   * gets both as [B, 1, T, T] float masks (`eager_mask`: `where(bool, 0, finfo.min)`), the sliding one built with
   * `and_masks` as for SDPA (slidingWindowMask) before the conversion.
   */
  function masks(rt: Runtime, b: number, t: number, hiddenDType: DType): { full: Tensor | null; sliding: Tensor | null } {
    const { cuda } = rt;
    const hasSliding = cfg.layerTypes.includes('sliding_attention');
    const hasFull = cfg.layerTypes.includes('full_attention');
    // find_packed_sequence_indices runs in each mask builder when there is neither an attention mask nor a cache
    if (options.attention === 'eager') {
      if (!useCache) findPackedSequenceIndices(rt, b, t);
      const full = eagerCausalMask(rt, b, t, hiddenDType);
      if (!useCache) findPackedSequenceIndices(rt, b, t);
      const sliding = eagerSlidingWindowMask(rt, b, t, hiddenDType);
      return { full: hasFull ? full : (cuda.release(full), null), sliding: hasSliding ? sliding : (cuda.release(sliding), null) };
    }
    if (!useCache) findPackedSequenceIndices(rt, b, t);
    if (!useCache) findPackedSequenceIndices(rt, b, t);
    return { full: null, sliding: windowMask ? slidingWindowMask(rt, b, t) : null };
  }

  return {
    parameters: params,
    tiedModules: !score && cfg.tieWordEmbeddings ? ['lm_head'] : [],
    // the head reads its weight as lm_head's (a modules_to_save copy of either module runs in that module only)
    inputEmbeddings: 'model.embed_tokens',
    tiedWeights: !score && cfg.tieWordEmbeddings ? { 'lm_head.weight': 'model.embed_tokens.weight' } : {},
    // each layer's activation, a token classifier's dropout
    parameterlessModules: [...Array.from({ length: cfg.layers }, (_, i) => `model.layers.${i}.mlp.act_fn`), ...(tokenClassifier ? ['dropout'] : [])],
    tensors: weights,
    makeInputs: (rt, batch) => headInputs(rt, batch, seqLen, cfg.head),
    loss(rt, [ids, labels]) {
      const { cuda } = rt;
      const [b, t] = ids!.shape as [number, number];
      // The scaled embedding's forward: `super().forward(input_ids) * self.embed_scale.to(self.weight.dtype)`: the
      // buffer is already in the weight's dtype; MulBackward0 saves it (0-dim), the lookup dies at once
      const looked = embedding(rt, w('model.embed_tokens.weight'), ids!, 'model.embed_tokens');
      const inputsEmbeds = mul(rt, looked, w('model.embed_tokens.embed_scale'), 'model.embed_tokens * embed_scale');
      cuda.release(looked);
      inputsRequireGrad?.hook(rt, inputsEmbeds);
      const positions = positionIds(rt, t);
      const { full, sliding } = masks(rt, b, t, inputsEmbeds.dtype);
      // Gemma 2: one rotary embedding; Gemma 3 (transformers 5.17): `for layer_type in set(self.config.layer_types):
      // position_embeddings[layer_type] = self.rotary_emb(hidden_states, position_ids, layer_type)`, one cos/sin
      // pair per kind of layer, all kept through the layers (a set's order varies by process: the pairs are of one
      // size, so memory does not depend on it; measured: lora_gemma3_1b_bf16_all_linear_s512, two pairs for 26 layers)
      const rope = new Map<GemmaLayerType | null, [Tensor, Tensor]>();
      for (const kind of ropeKinds) rope.set(kind, rotaryCosSin(rt, w(invFreqName(kind)), t, hd, inputsEmbeds.dtype));
      const ropeOf = (i: number) => rope.get(g3 ? cfg.layerTypes[i]! : null)!;
      const hidden0 = cuda.ref(inputsEmbeds);
      const maskOf = (i: number) => (cfg.layerTypes[i] === 'sliding_attention' ? sliding : full);
      // each layer's call gets its own kind's mask and rotary pair (`causal_mask_mapping[layer.attention_type]`)
      const held = (i: number) => [maskOf(i), ...ropeOf(i), positions];
      let hidden = runBlocks(rt, hidden0, cfg.layers, checkpointing, (x, i) => layer(rt, x, i, ropeOf(i)[0], ropeOf(i)[1], maskOf(i)), held, reuse);
      reentrantClosures?.hold(rt, [...new Set(Array.from({ length: cfg.layers }, (_, i) => held(i)).flat())]);
      const normed = rmsNorm(rt, hidden, w('model.norm.weight'), 'model.norm');
      cuda.release(hidden);
      hidden = normed;
      // the model's forward returns: its locals die
      for (const [cos, sin] of [...rope.values()].reverse()) {
        cuda.release(sin);
        cuda.release(cos);
      }
      for (const x of [sliding, full, positions, inputsEmbeds]) cuda.release(x);
      // a classifier has no final soft-capping: that is Gemma's causal LM's
      if (classifier && score) return decoderClassifierLoss(rt, hidden, w(score.weight), labels!, classifier, cache);
      if (tokenClassifier && score) return decoderTokenClassifierLoss(rt, hidden, w(score.weight), score.bias ? w(score.bias) : null, labels!, tokenClassifier, cache);
      let logits = proj(rt, hidden, 'lm_head');
      if (cfg.finalSoftcap !== null) {
        // Gemma2ForCausalLM.forward: `logits = logits / cap; logits = torch.tanh(logits); logits = logits * cap`
        // over [B, T, vocab]: each rebinding frees the previous logits; TanhBackward0 keeps its result
        const divided = divScalar(rt, logits, 'logits / final_logit_softcapping');
        cuda.release(logits);
        const capped = tanh(rt, divided, 'tanh(logits / final_logit_softcapping)');
        cuda.release(divided);
        logits = mulScalar(rt, capped, 'tanh(...) * final_logit_softcapping');
        cuda.release(capped);
      }
      const loss = causalLmLoss(rt, logits, ids!);
      cuda.release(hidden);
      // the output object (logits, the cache) is dropped once `.loss` is read
      cuda.release(logits);
      for (const x of cache.splice(0)) cuda.release(x);
      return loss;
    },
    releaseGraph(rt) {
      inputsRequireGrad?.releaseGraph(rt);
      reentrantClosures?.releaseGraph(rt);
    },
  };
}

