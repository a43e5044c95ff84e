/**
 * `LlamaForCausalLM`, `MistralForCausalLM` and `Qwen2ForCausalLM` (transformers 5.x modeling_llama.py and the
 * models generated from it) trained as `model(input_ids=ids, labels=ids).loss`.
 * Parameters in `Module._apply` order: embed_tokens, per layer self_attn (q, k, v, o projections; Qwen2 with q/k/v
 * biases), mlp (gate, up, down), input_layernorm, post_attention_layernorm; norm; then the rotary buffers
 * inv_freq and original_inv_freq (fp32 [head_dim / 2] each); lm_head unless tied to embed_tokens.
 * Forward: the embedding, position ids, the causal mask (none for SDPA), the rotary cos/sin (fp32 math under
 * no_grad, cast to the hidden states' dtype), the layers, the final norm, lm_head and ForCausalLMLoss.
 */
import { InputError } from '../../errors.ts';
import { repeatHeads } from '../../ops/attention.ts';
import { embedding } from '../../ops/embedding.ts';
import { addScalar, addTensors, cat, meanLastDim, mul, neg, powScalar, rsqrt, toDType } from '../../ops/elementwise.ts';
import { linear } from '../../ops/linear.ts';
import { bmm } from '../../ops/matmul.ts';
import type { Runtime } from '../../ops/runtime.ts';
import type { DType } from '../../tensor/dtype.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type { ParameterSpec, TrainableModel } from '../model.ts';
import { attend, cacheUpdate, eagerCausalMask, findPackedSequenceIndices, gradCopies, splitHeads } from './attention.ts';
import { causalLmLoss, hfActivation, positionIds, tokenInputs } from './common.ts';
import type { LlamaConfig } from './config.ts';
import type { HfModelOptions } from './gpt2.ts';
import { runBlocks } from '../checkpointing.ts';

export function llamaModel(cfg: LlamaConfig, options: HfModelOptions): TrainableModel {
  const { dtype, seqLen, checkpointing } = options;
  const hd = cfg.headDim;
  const params: ParameterSpec[] = [];
  const p = (name: string, shape: number[], d: DType = dtype) => params.push({ name, shape, dtype: d });
  p('model.embed_tokens.weight', [cfg.vocabSize, cfg.hidden]);
  for (let i = 0; i < cfg.layers; i++) {
    const l = `model.layers.${i}`;
    const qkvBias = cfg.qkvBias || cfg.attentionBias;
    p(`${l}.self_attn.q_proj.weight`, [cfg.heads * hd, cfg.hidden]);
    if (qkvBias) p(`${l}.self_attn.q_proj.bias`, [cfg.heads * hd]);
    p(`${l}.self_attn.k_proj.weight`, [cfg.kvHeads * hd, cfg.hidden]);
    if (qkvBias) p(`${l}.self_attn.k_proj.bias`, [cfg.kvHeads * hd]);
    p(`${l}.self_attn.v_proj.weight`, [cfg.kvHeads * hd, cfg.hidden]);
    if (qkvBias) p(`${l}.self_attn.v_proj.bias`, [cfg.kvHeads * hd]);
    p(`${l}.self_attn.o_proj.weight`, [cfg.hidden, cfg.heads * hd]);
    if (cfg.attentionBias) p(`${l}.self_attn.o_proj.bias`, [cfg.hidden]);
    for (const [name, out, inp] of [
      ['gate_proj', cfg.intermediate, cfg.hidden],
      ['up_proj', cfg.intermediate, cfg.hidden],
      ['down_proj', cfg.hidden, cfg.intermediate],
    ] as const) {
      p(`${l}.mlp.${name}.weight`, [out, inp]);
      if (cfg.mlpBias) p(`${l}.mlp.${name}.bias`, [out]);
    }
    p(`${l}.input_layernorm.weight`, [cfg.hidden]);
    p(`${l}.post_attention_layernorm.weight`, [cfg.hidden]);
  }
  p('model.norm.weight', [cfg.hidden]);
  // rotary_emb's buffers, fp32 whatever the model's dtype
  params.push({ name: 'model.rotary_emb.inv_freq', shape: [hd / 2], dtype: 'float32', buffer: true });
  params.push({ name: 'model.rotary_emb.original_inv_freq', shape: [hd / 2], dtype: 'float32', buffer: true });
  if (!cfg.tieWordEmbeddings) p('lm_head.weight', [cfg.vocabSize, cfg.hidden]);
  const lmHeadName = cfg.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight';
  const weights = new Map<string, Tensor>();
  const w = (name: string) => weights.get(name)!;
  const wOrNull = (name: string) => weights.get(name) ?? null;
  const useCache = cfg.useCache && !checkpointing;
  /** The DynamicCache's keys and values of the current forward. */
  const cache: Tensor[] = [];
  // The sliding-window mask is materialized (and SDPA then gets a mask) only once T reaches the window.
  if (cfg.slidingWindow !== null && seqLen >= cfg.slidingWindow) {
    throw new InputError('training.seq_len', `sliding-window attention (window ${cfg.slidingWindow}) at seq_len ${seqLen} is not simulated yet: use a seq_len below the window`);
  }

  /**
   * LlamaRMSNorm: `hidden.to(float32)`; `variance = hidden.pow(2).mean(-1, keepdim=True)`;
   * `hidden = hidden * torch.rsqrt(variance + eps)`; `weight * hidden.to(input_dtype)`.
   */
  function rmsNorm(rt: Runtime, x: Tensor, weight: Tensor, label: string): Tensor {
    const { cuda } = rt;
    const up = toDType(rt, x, 'float32', `${label} to(float32)`);
    const squared = powScalar(rt, up, 2, `${label} pow(2)`);
    const variance = meanLastDim(rt, squared, `${label} variance`);
    cuda.release(squared);
    const eps = addScalar(rt, variance, `${label} variance + eps`);
    const inv = rsqrt(rt, eps, `${label} rsqrt`);
    cuda.release(eps);
    const normed = mul(rt, up, inv, `${label} hidden * rsqrt`);
    cuda.release(inv);
    cuda.release(up);
    const down = toDType(rt, normed, x.dtype, `${label} to(input_dtype)`);
    const out = mul(rt, weight, down, label);
    cuda.release(down);
    cuda.release(normed);
    cuda.release(variance);
    return out;
  }

  /** `q * cos + rotate_half(q) * sin`, rotate_half = `cat((-x[..., D/2:], x[..., :D/2]), -1)`. */
  function rotary(rt: Runtime, x: Tensor, cos: Tensor, sin: Tensor, label: string): Tensor {
    const { cuda } = rt;
    const a = mul(rt, x, cos, `${label} * cos`);
    const halfShape = [...x.shape.slice(0, -1), hd / 2];
    const x1 = sliceView(rt, x, halfShape, `${label}[..., :D/2]`);
    const x2 = sliceView(rt, x, halfShape, `${label}[..., D/2:]`);
    const negX2 = neg(rt, x2, `${label} -x2`);
    const rotated = cat(rt, [negX2, x1], x.shape, `${label} rotate_half`);
    cuda.release(negX2);
    cuda.release(x2);
    cuda.release(x1);
    const b = mul(rt, rotated, sin, `${label} rotate_half * sin`);
    cuda.release(rotated);
    const out = addTensors(rt, a, b, `${label} with rotary embedding`);
    cuda.release(b);
    cuda.release(a);
    return out;
  }

  /** LlamaAttention.forward: (attn_output, attn_weights). */
  function attention(rt: Runtime, x: Tensor, i: number, cos: Tensor, sin: Tensor, mask: Tensor | null): [Tensor, Tensor | null] {
    const { cuda } = rt;
    const a = `model.layers.${i}.self_attn`;
    const call = { impl: options.attention, device: options.device, dropoutP: cfg.attentionDropout, mask, kvContiguous: useCache, softmaxFp32: true, gqa: cfg.kvHeads !== cfg.heads, label: `${a} attention` };
    const qp = linear(rt, x, w(`${a}.q_proj.weight`), wOrNull(`${a}.q_proj.bias`), `${a}.q_proj`);
    // The rotary embedding's rotate_half backward (SliceBackward0: a zero tensor of the input's shape) is the
    // first gradient to reach q and k: it is in [B, H, T, D] order, so their head views copy it back (measured).
    const copies = { ...gradCopies(qp, call), q: true, k: true };
    const q0 = splitHeads(rt, qp, cfg.heads, hd, copies.q, `${a} query`);
    cuda.release(qp);
    const kp = linear(rt, x, w(`${a}.k_proj.weight`), wOrNull(`${a}.k_proj.bias`), `${a}.k_proj`);
    const k0 = splitHeads(rt, kp, cfg.kvHeads, hd, copies.k, `${a} key`);
    cuda.release(kp);
    const vp = linear(rt, x, w(`${a}.v_proj.weight`), wOrNull(`${a}.v_proj.bias`), `${a}.v_proj`);
    let v = splitHeads(rt, vp, cfg.kvHeads, hd, copies.v, `${a} value`);
    cuda.release(vp);
    const cos4 = cuda.view(cos, [cos.shape[0]!, 1, ...cos.shape.slice(1)]);
    const sin4 = cuda.view(sin, [sin.shape[0]!, 1, ...sin.shape.slice(1)]);
    const q = rotary(rt, q0, cos4, sin4, `${a} query`);
    let k = rotary(rt, k0, cos4, sin4, `${a} key`);
    cuda.release(sin4);
    cuda.release(cos4);
    cuda.release(q0);
    cuda.release(k0);
    if (useCache) {
      const [kc, vc] = cacheUpdate(rt, k, v, a);
      cuda.release(k);
      cuda.release(v);
      k = kc;
      v = vc;
    }
    if (useCache) {
      cache.push(cuda.ref(k), cuda.ref(v)); // the DynamicCache keeps them until the output is dropped
    }
    let merged: { out: Tensor; weights: Tensor | null };
    if (options.attention === 'eager' && cfg.kvHeads !== cfg.heads) {
      // eager_attention_forward's repeat_kv: expand then reshape, a copy [B, H, T, D] (its own locals: the
      // caller's k and v live on until LlamaAttention.forward returns)
      const rk = repeatHeads(rt, k, cfg.heads, `${a} key`);
      const rv = repeatHeads(rt, v, cfg.heads, `${a} value`);
      merged = attend(rt, q, rk, rv, { ...call, kvContiguous: true });
      cuda.release(rv);
      cuda.release(rk);
    } else {
      merged = attend(rt, q, k, v, call);
    }
    const out = linear(rt, merged.out, w(`${a}.o_proj.weight`), wOrNull(`${a}.o_proj.bias`), `${a}.o_proj`);
    cuda.release(merged.out);
    for (const t of [q, k, v]) cuda.release(t); // LlamaAttention.forward returns: its locals die
    return [out, merged.weights];
  }

  function mlp(rt: Runtime, x: Tensor, i: number): Tensor {
    const { cuda } = rt;
    const m = `model.layers.${i}.mlp`;
    const gate = linear(rt, x, w(`${m}.gate_proj.weight`), wOrNull(`${m}.gate_proj.bias`), `${m}.gate_proj`);
    const act = hfActivation(rt, cfg.activation, gate, `${m}.act_fn`);
    cuda.release(gate);
    const up = linear(rt, x, w(`${m}.up_proj.weight`), wOrNull(`${m}.up_proj.bias`), `${m}.up_proj`);
    const prod = mul(rt, act, up, `${m} act(gate) * up`);
    cuda.release(up);
    cuda.release(act);
    const out = linear(rt, prod, w(`${m}.down_proj.weight`), wOrNull(`${m}.down_proj.bias`), `${m}.down_proj`);
    cuda.release(prod);
    return out;
  }

  function layer(rt: Runtime, x: Tensor, i: number, cos: Tensor, sin: Tensor, mask: Tensor | null): Tensor {
    const { cuda } = rt;
    const l = `model.layers.${i}`;
    const normed = rmsNorm(rt, x, w(`${l}.input_layernorm.weight`), `${l}.input_layernorm`);
    // `hidden_states, _ = self.self_attn(...)`: `_` holds the attention weights until the layer returns
    const [attnOut, weights] = attention(rt, normed, i, cos, sin, mask);
    cuda.release(normed);
    const hidden = addTensors(rt, x, attnOut, `${l} residual + attention`);
    cuda.release(attnOut);
    const normed2 = rmsNorm(rt, hidden, w(`${l}.post_attention_layernorm.weight`), `${l}.post_attention_layernorm`);
    const mlpOut = mlp(rt, normed2, i);
    cuda.release(normed2);
    const out = addTensors(rt, hidden, mlpOut, `${l} residual + mlp`);
    cuda.release(mlpOut);
    cuda.release(hidden);
    cuda.release(weights);
    return out;
  }

  /** LlamaRotaryEmbedding.forward under no_grad: fp32 math, then cos and sin in the hidden states' dtype. */
  function rotaryEmbedding(rt: Runtime, t: number, hiddenDType: DType): [Tensor, Tensor] {
    const { cuda, autograd } = rt;
    const gradMode = autograd.gradMode;
    autograd.gradMode = false;
    const autocast = rt.autocast;
    rt.autocast = null; // maybe_autocast(enabled=False)
    try {
      const positions = cuda.empty([1, 1, t], 'float32', 'rotary: position_ids.float()', 'temporary');
      const invFreq = cuda.view(w('model.rotary_emb.inv_freq'), [1, hd / 2, 1]);
      const freqs = bmm(rt, invFreq, positions, 'rotary: inv_freq @ position_ids');
      cuda.release(invFreq);
      const emb = cuda.empty([1, t, hd], 'float32', 'rotary: cat(freqs, freqs)', 'temporary');
      const cosRaw = cuda.empty([1, t, hd], 'float32', 'rotary: emb.cos()', 'temporary');
      const cos = cuda.empty([1, t, hd], 'float32', 'rotary: cos * attention_scaling', 'temporary');
      cuda.release(cosRaw);
      const sinRaw = cuda.empty([1, t, hd], 'float32', 'rotary: emb.sin()', 'temporary');
      const sin = cuda.empty([1, t, hd], 'float32', 'rotary: sin * attention_scaling', 'temporary');
      cuda.release(sinRaw);
      const cosOut = toDType(rt, cos, hiddenDType, 'rotary cos');
      const sinOut = toDType(rt, sin, hiddenDType, 'rotary sin');
      for (const x of [positions, freqs, emb, cos, sin]) cuda.release(x);
      return [cosOut, sinOut];
    } finally {
      rt.autocast = autocast;
      autograd.gradMode = gradMode;
    }
  }

  return {
    description: `${cfg.modelType} (${cfg.layers} layers, hidden ${cfg.hidden}, ${cfg.heads} heads / ${cfg.kvHeads} key-value heads, vocab ${cfg.vocabSize})`,
    parameters: params,
    tensors: weights,
    makeInputs: (rt, batch) => tokenInputs(rt, batch, seqLen),
    loss(rt, [ids]) {
      const { cuda } = rt;
      const [b, t] = ids!.shape as [number, number];
      const inputsEmbeds = embedding(rt, w('model.embed_tokens.weight'), ids!, 'model.embed_tokens');
      const positions = positionIds(rt, t);
      if (!useCache) findPackedSequenceIndices(rt, b, t);
      const mask = options.attention === 'eager' ? eagerCausalMask(rt, b, t, inputsEmbeds.dtype) : null;
      const [cos, sin] = rotaryEmbedding(rt, t, inputsEmbeds.dtype);
      let hidden = runBlocks(rt, cuda.ref(inputsEmbeds), cfg.layers, checkpointing, (x, i) => layer(rt, x, i, cos, sin, mask), [mask, cos, sin, positions]);
      const normed = rmsNorm(rt, hidden, w('model.norm.weight'), 'model.norm');
      cuda.release(hidden);
      hidden = normed;
      // LlamaModel.forward returns: its locals die
      for (const x of [sin, cos, mask, positions, inputsEmbeds]) cuda.release(x);
      const logits = linear(rt, hidden, w(lmHeadName), null, 'lm_head');
      const loss = causalLmLoss(rt, logits, ids!);
      cuda.release(hidden);
      // the output object (logits, the cache) is dropped once `.loss` is read
      cuda.release(logits);
      for (const x of cache.splice(0)) cuda.release(x);
      return loss;
    },
  };
}

/** `x[..., a:b]` of the last dimension: a view; SliceBackward0 builds a zero tensor of x's shape and copies in. */
function sliceView(rt: Runtime, x: Tensor, shape: readonly number[], label: string): Tensor {
  const { cuda, autograd } = rt;
  const out = cuda.view(x, shape);
  autograd.record('SliceBackward0', [x], [out], [], ([grad]) => [grad ? cuda.empty(x.shape, grad.dtype, `grad of ${label}`) : null]);
  return out;
}
