/**
 * `LlamaForCausalLM`, `MistralForCausalLM`, `Qwen2ForCausalLM`, `Qwen3ForCausalLM`, `Phi3ForCausalLM`,
 * `MixtralForCausalLM` (Mistral's with a sparse mixture of experts for the MLP: hf/mixtral-moe.ts),
 * `Qwen3MoeForCausalLM` (Qwen3's attention, Mixtral's model with its own router), `SmolLM3ForCausalLM`
 * (Llama's, with no rotary embedding in its NoPE layers) and `Olmo2ForCausalLM` (norms after attention and the
 * MLP: LlamaConfig.normAfter) (transformers 5.17
 * modeling_llama.py and the models generated from it) trained as `model(input_ids=ids, labels=ids).loss`, or their
 * `…ForSequenceClassification` and `…ForTokenClassification` as `model(input_ids=ids, labels=labels).loss` (`score`
 * instead of lm_head: common.ts `decoderClassifierLoss`, `decoderTokenClassifierLoss`).
 * Parameters in `Module._apply` order: embed_tokens, per layer self_attn (q, k, v, o projections; Qwen2 with q/k/v
 * biases; Qwen3 and Qwen3-MoE then q_norm and k_norm; Phi-3 o_proj then the fused qkv_proj), mlp (gate, up, down;
 * Phi-3 gate_up, down; Mixtral gate (the router), experts.gate_up_proj, experts.down_proj; Qwen3-MoE the experts'
 * then the router), input_layernorm (none in OLMo 2), post_attention_layernorm (then OLMo 2's
 * post_feedforward_layernorm); norm; then the rotary buffers inv_freq and
 * original_inv_freq (fp32 [rotary dims / 2] each); lm_head unless tied to embed_tokens. LoRA adapters follow
 * their base layer's parameters (models/peft/lora.ts).
 * Forward: the embedding, position ids, the causal mask (none for SDPA), the rotary cos/sin (fp32 math under
 * no_grad, cast to the hidden states' dtype), the layers, the final norm, lm_head and ForCausalLMLoss.
 */
import { InputError } from '../../errors.ts';
import { embedding } from '../../ops/embedding.ts';
import { addScalar, addTensors, cat, meanLastDim, mul, powScalar, rsqrt, toDType } from '../../ops/elementwise.ts';
import { applyRotary, longropeFrequencyUpdate, rotaryCosSin, sliceView } from './rotary.ts';
import { dropout } from '../../ops/pointwise.ts';
import { viewCopyingGrad } from '../../ops/matmul.ts';
import type { Runtime } from '../../ops/runtime.ts';
import type { DType } from '../../tensor/dtype.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type { ParameterSpec, TrainableModel } from '../model.ts';
import { attend, cacheUpdate, eagerCausalMask, eagerSlidingWindowMask, findPackedSequenceIndices, gradCopies, repeatKv, slidingWindowMask, splitHeads } from './attention.ts';
import { causalLmLoss, decoderClassifierLoss, decoderClassifierHeads, decoderTokenClassifierLoss, headInputs, hfActivation, positionIds } from './common.ts';
import type { LlamaConfig } from './config.ts';
import type { HfModelOptions } from './gpt2.ts';
import { ReentrantClosures, runBlocks } from '../checkpointing.ts';
import type { BlockReuse } from '../block-reuse.ts';
import { FULL_FINE_TUNING, InputsRequireGrad, linearModules, linearParameters, type FineTuning } from '../peft/lora.ts';
import { sparseMoeBlock } from './mixtral-moe.ts';

export function llamaModel(cfg: LlamaConfig, options: HfModelOptions, tuning: FineTuning = FULL_FINE_TUNING): TrainableModel {
  const { dtype, seqLen, checkpointing } = options;
  const hd = cfg.headDim;
  const params: ParameterSpec[] = [];
  const p = (name: string, shape: number[], d: DType = dtype) => params.push({ name, shape, dtype: d });
  const lin = (path: string, out: number, inp: number, bias: boolean) => params.push(...linearParameters(path, out, inp, bias, dtype, tuning));
  /** Whether layer i's MLP is the sparse mixture of experts (Qwen3-MoE's `mlp_only_layers` are dense). */
  const sparseLayer = (i: number) => cfg.moe !== null && !cfg.moe.denseLayers.includes(i);
  p('model.embed_tokens.weight', [cfg.vocabSize, cfg.hidden]);
  /** Each layer's parameters, as [first, end) of `params` (Note [Reused blocks]: a layer's weights). */
  const layerParams: [number, number][] = [];
  for (let i = 0; i < cfg.layers; i++) {
    const first = params.length;
    const l = `model.layers.${i}`;
    const qkvBias = cfg.qkvBias || cfg.attentionBias;
    if (cfg.fusedProjections) {
      // Phi3Attention.__init__ registers o_proj before qkv_proj
      lin(`${l}.self_attn.o_proj`, cfg.hidden, cfg.heads * hd, false);
      lin(`${l}.self_attn.qkv_proj`, (cfg.heads + 2 * cfg.kvHeads) * hd, cfg.hidden, false);
      lin(`${l}.mlp.gate_up_proj`, 2 * cfg.intermediate, cfg.hidden, false);
      lin(`${l}.mlp.down_proj`, cfg.hidden, cfg.intermediate, false);
    } else {
      lin(`${l}.self_attn.q_proj`, cfg.heads * hd, cfg.hidden, qkvBias);
      lin(`${l}.self_attn.k_proj`, cfg.kvHeads * hd, cfg.hidden, qkvBias);
      lin(`${l}.self_attn.v_proj`, cfg.kvHeads * hd, cfg.hidden, qkvBias);
      lin(`${l}.self_attn.o_proj`, cfg.hidden, cfg.heads * hd, cfg.attentionBias);
      if (cfg.qkNorm) {
        // Qwen3's per-head norms; OLMo 2's over the whole projection
        p(`${l}.self_attn.q_norm.weight`, [cfg.normAfter ? cfg.heads * hd : hd]);
        p(`${l}.self_attn.k_norm.weight`, [cfg.normAfter ? cfg.kvHeads * hd : hd]);
      }
      const moe = sparseLayer(i) ? cfg.moe : null;
      if (moe) {
        // MixtralSparseMoeBlock registers the router (`gate`), then the experts' 3-D weights; Qwen3MoeSparseMoeBlock
        // the experts first
        const router = () => params.push({ name: `${l}.mlp.gate.weight`, shape: [moe.experts, cfg.hidden], dtype, moe: 'router' });
        if (moe.kind === 'mixtral') router();
        params.push({ name: `${l}.mlp.experts.gate_up_proj`, shape: [moe.experts, 2 * moe.intermediate, cfg.hidden], dtype, moe: 'experts' });
        params.push({ name: `${l}.mlp.experts.down_proj`, shape: [moe.experts, cfg.hidden, moe.intermediate], dtype, moe: 'experts' });
        if (moe.kind === 'qwen3_moe') router();
      } else {
        lin(`${l}.mlp.gate_proj`, cfg.intermediate, cfg.hidden, cfg.mlpBias);
        lin(`${l}.mlp.up_proj`, cfg.intermediate, cfg.hidden, cfg.mlpBias);
        lin(`${l}.mlp.down_proj`, cfg.hidden, cfg.intermediate, cfg.mlpBias);
      }
    }
    if (!cfg.normAfter) p(`${l}.input_layernorm.weight`, [cfg.hidden]);
    p(`${l}.post_attention_layernorm.weight`, [cfg.hidden]);
    if (cfg.normAfter) p(`${l}.post_feedforward_layernorm.weight`, [cfg.hidden]);
    layerParams.push([first, params.length]);
  }
  p('model.norm.weight', [cfg.hidden]);
  // rotary_emb's buffers, fp32 whatever the model's dtype
  params.push({ name: 'model.rotary_emb.inv_freq', shape: [cfg.rotaryDim / 2], dtype: 'float32', buffer: true });
  params.push({ name: 'model.rotary_emb.original_inv_freq', shape: [cfg.rotaryDim / 2], dtype: 'float32', buffer: true });
  const { classifier, tokenClassifier, score } = decoderClassifierHeads(cfg.head, cfg.hidden, dtype, tuning.lora !== null);
  if (score) params.push(...score.params);
  else if (!cfg.tieWordEmbeddings) params.push(...linearParameters('lm_head', cfg.vocabSize, cfg.hidden, false, dtype, tuning, true)); // the output embeddings
  const weights = new Map<string, Tensor>();
  const w = (name: string) => weights.get(name)!;
  const wOrNull = (name: string) => weights.get(name) ?? null;
  const proj = linearModules(weights, tuning.lora);
  const layerModules = Array.from({ length: cfg.layers }, (_, i) => layerModuleNames(i));
  const useCache = cfg.useCache && !checkpointing;
  /** The DynamicCache's keys and values of the current forward. */
  const cache: Tensor[] = [];
  // Note [Reused blocks]: the layers run one code on one shape but where a layer's kind differs (Qwen3-MoE's dense
  // layers, SmolLM3's NoPE layers)
  const reuse: BlockReuse = {
    kind: (i) => `${sparseLayer(i)} ${cfg.noRopeLayers.includes(i)}`,
    name: (i) => `model.layers.${i}`,
    weights: (i) => params.slice(...layerParams[i]!).map((spec) => w(spec.name)),
    kept: cache,
  };
  // PeftModel.__init__ on a checkpointing model: enable_input_require_grads (the embedding's output a leaf)
  const inputsRequireGrad = InputsRequireGrad.of(tuning, checkpointing);
  const reentrantClosures = ReentrantClosures.of(checkpointing);
  // The sliding-window mask is materialized for SDPA (which then gets a mask) only once T reaches the window
  // (`_ignore_causal_mask_sdpa`); eager attention gets its float version at any length (eagerSlidingWindowMask).
  const windowMask = cfg.slidingWindow !== null && seqLen >= cfg.slidingWindow;
  // Mistral's and Phi-3's eager mask is the window's at any length (measured); Qwen2's, Qwen3's and Qwen3-MoE's
  // `use_sliding_window` mixes sliding and full layers (max_window_layers), which are not simulated with eager
  // attention: below the window their causal mask is the same, beyond it they are refused
  const eagerWindow = cfg.slidingWindow !== null && (cfg.modelType === 'mistral' || cfg.modelType === 'phi3');
  if (windowMask && !eagerWindow && options.attention === 'eager') {
    throw new InputError('training.seq_len', `eager sliding-window attention (window ${cfg.slidingWindow}) at seq_len ${seqLen} is not simulated yet: use attention "sdpa" or a seq_len below the window`);
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
    if (cfg.normAfter) {
      // Olmo2RMSNorm: `(self.weight * hidden_states).to(input_dtype)`: the weight applied in fp32, then the cast
      const weighted = mul(rt, weight, normed, label);
      const out = toDType(rt, weighted, x.dtype, `${label} to(input_dtype)`);
      cuda.release(weighted);
      cuda.release(normed);
      cuda.release(variance);
      return out;
    }
    const down = toDType(rt, normed, x.dtype, `${label} to(input_dtype)`);
    const out = mul(rt, weight, down, label);
    cuda.release(down);
    cuda.release(normed);
    cuda.release(variance);
    return out;
  }

  /**
   * Phi-3's apply_rotary_pos_emb: `q_rot, q_pass = q[..., :rotary_dim], q[..., rotary_dim:]` (a slice of the
   * whole last dimension is an alias of q; the pass-through slice is a view, empty for a full rotary), then `cat([q_rot * cos + rotate_half(q_rot) * sin, q_pass], -1)`: a new tensor. The
   * empty slice's SliceBackward0 still makes a zero gradient of q's shape.
   */
  function partialRotary(rt: Runtime, rot: Tensor, pass: Tensor, cos: Tensor, sin: Tensor, label: string): Tensor {
    const turned = applyRotary(rt, rot, cos, sin, label);
    const out = cat(rt, [turned, pass], [...turned.shape.slice(0, -1), hd], `${label} cat(rotated, pass)`);
    rt.cuda.release(turned);
    return out;
  }

  /** `rot, pass` of Phi-3's rotary embedding for one of q, k: views, made before the rotations. */
  function rotarySplit(rt: Runtime, x: Tensor, label: string): [Tensor, Tensor] {
    const lead = x.shape.slice(0, -1);
    // a slice of the whole dimension is x itself, which `__getitem__` returns as `alias(x)`: an AliasBackward0 node
    // that passes the gradient on, and collects the rotations' gradients in its own buffer (measured: the empty
    // pass slice's zero gradient reaches q first, the rotations' sum is added into it)
    const rot = cfg.rotaryDim === hd ? rt.autograd.view('AliasBackward0', x) : sliceView(rt, x, [...lead, cfg.rotaryDim], `${label}[..., :rotary_dim]`);
    const pass = sliceView(rt, x, [...lead, hd - cfg.rotaryDim], `${label}[..., rotary_dim:]`);
    return [rot, pass];
  }

  /** The heads of q, k, v [B, H, T, D] as each family's attention makes them from its input. */
  function headsOf(rt: Runtime, x: Tensor, modules: LayerModuleNames, copies: { q: boolean; k: boolean; v: boolean }): { q: Tensor; k: Tensor; v: Tensor; held: Tensor[] } {
    const { cuda } = rt;
    const a = modules.attn;
    const [b, t] = x.shape as [number, number];
    /** Each of q, k, v (in that order) `.view(B, T, -1, D).transpose(1, 2)`, the tensor it views released. */
    const toHeads = (qs: Tensor, ks: Tensor, vs: Tensor) => {
      const q = splitHeads(rt, qs, cfg.heads, hd, copies.q, `${a} query`);
      cuda.release(qs);
      const k = splitHeads(rt, ks, cfg.kvHeads, hd, copies.k, `${a} key`);
      cuda.release(ks);
      const v = splitHeads(rt, vs, cfg.kvHeads, hd, copies.v, `${a} value`);
      cuda.release(vs);
      return { q, k, v };
    };
    if (cfg.fusedProjections) {
      // Phi3Attention: qkv = qkv_proj(x); q/k/v = slices of its last dimension (SliceBackward0: a zero gradient of
      // qkv's shape each), each `.view(B, T, -1, D).transpose(1, 2)`. qkv is a local until forward returns.
      const qkv = proj(rt, x, modules.qkvProj);
      const qs = sliceView(rt, qkv, [b, t, cfg.heads * hd], `${a} qkv[..., :q]`);
      const ks = sliceView(rt, qkv, [b, t, cfg.kvHeads * hd], `${a} qkv[..., q:k]`);
      const vs = sliceView(rt, qkv, [b, t, cfg.kvHeads * hd], `${a} qkv[..., k:]`);
      return { ...toHeads(qs, ks, vs), held: [qkv] };
    }
    if (cfg.qkNorm && cfg.normAfter) {
      // Olmo2Attention: `q_norm(q_proj(x))` over the whole projection, the same for k, then v; then each
      // `.view(B, T, -1, D).transpose(1, 2)`
      const qn = proj(rt, x, modules.qProj);
      const qNormed = rmsNorm(rt, qn, w(modules.qNorm), `${a} query norm`);
      cuda.release(qn);
      const kn = proj(rt, x, modules.kProj);
      const kNormed = rmsNorm(rt, kn, w(modules.kNorm), `${a} key norm`);
      cuda.release(kn);
      return { ...toHeads(qNormed, kNormed, proj(rt, x, modules.vProj)), held: [] };
    }
    if (cfg.qkNorm) {
      // Qwen3Attention: `q_norm(q_proj(x).view(B, T, -1, D)).transpose(1, 2)`, the same for k; v as in Llama
      const normed = (path: string, heads: number, norm: string, copy: boolean, label: string) => {
        const projected = proj(rt, x, path);
        const viewed = copy ? viewCopyingGrad(rt, projected, [b, t, heads, hd], label, 'ViewBackward0') : rt.autograd.view('ViewBackward0', projected, [b, t, heads, hd]);
        cuda.release(projected);
        const n = rmsNorm(rt, viewed, w(norm), `${label} norm`);
        cuda.release(viewed);
        const out = rt.autograd.view('TransposeBackward0', n, [b, heads, t, hd]);
        cuda.release(n);
        return out;
      };
      const q = normed(modules.qProj, cfg.heads, modules.qNorm, copies.q, `${a} query`);
      const k = normed(modules.kProj, cfg.kvHeads, modules.kNorm, copies.k, `${a} key`);
      const vp = proj(rt, x, modules.vProj);
      const v = splitHeads(rt, vp, cfg.kvHeads, hd, copies.v, `${a} value`);
      cuda.release(vp);
      return { q, k, v, held: [] };
    }
    const qp = proj(rt, x, modules.qProj);
    const q = splitHeads(rt, qp, cfg.heads, hd, copies.q, `${a} query`);
    cuda.release(qp);
    const kp = proj(rt, x, modules.kProj);
    const k = splitHeads(rt, kp, cfg.kvHeads, hd, copies.k, `${a} key`);
    cuda.release(kp);
    const vp = proj(rt, x, modules.vProj);
    const v = splitHeads(rt, vp, cfg.kvHeads, hd, copies.v, `${a} value`);
    cuda.release(vp);
    return { q, k, v, held: [] };
  }

  /** LlamaAttention.forward (and Qwen3's, Phi-3's): (attn_output, attn_weights). */
  function attention(rt: Runtime, x: Tensor, i: number, cos: Tensor, sin: Tensor, mask: Tensor | null): [Tensor, Tensor | null] {
    const { cuda } = rt;
    const modules = layerModules[i]!;
    const a = modules.attn;
    const call = { impl: options.attention, device: options.device, dropoutP: cfg.attentionDropout, mask, kvContiguous: useCache, qContiguous: cfg.fusedProjections, kContiguous: cfg.fusedProjections, softmaxFp32: true, probsCast: 'query' as const, gqa: cfg.kvHeads !== cfg.heads, label: `${a} attention` };
    // The rotary embedding's rotate_half backward (SliceBackward0: a zero tensor of the input's shape) is the
    // first gradient to reach q and k: it is in [B, H, T, D] order, so their head views copy it back (measured).
    // (the projections' dtype: under autocast the linear's, not the fp32 input's). SmolLM3's NoPE layers apply none.
    const rope = !cfg.noRopeLayers.includes(i);
    const copies = { ...gradCopies({ dtype: rt.autocast?.dtype ?? x.dtype }, call), ...(rope ? { q: true, k: true } : {}) };
    // with a sliding-window mask, repeat_kv's backward sums the heads' gradients into contiguous [B, KV, T, D]
    // tensors: v's head view copies its gradient too (measured: mistral_4l_amp_bf16_window256_ckpt)
    if (mask && options.attention === 'sdpa' && cfg.kvHeads !== cfg.heads) copies.v = true;
    const heads = headsOf(rt, x, modules, copies);
    const q0 = heads.q;
    const k0 = heads.k;
    let v = heads.v;
    const cos4 = cuda.view(cos, [cos.shape[0]!, 1, ...cos.shape.slice(1)]);
    const sin4 = cuda.view(sin, [sin.shape[0]!, 1, ...sin.shape.slice(1)]);
    let q: Tensor;
    let k: Tensor;
    if (cfg.fusedProjections) {
      const [qRot, qPass] = rotarySplit(rt, q0, `${a} query`);
      const [kRot, kPass] = rotarySplit(rt, k0, `${a} key`);
      q = partialRotary(rt, qRot, qPass, cos4, sin4, `${a} query`);
      k = partialRotary(rt, kRot, kPass, cos4, sin4, `${a} key`);
      for (const t of [kPass, kRot, qPass, qRot]) cuda.release(t);
    } else if (rope && cfg.normAfter) {
      // OLMo 2's apply_rotary_pos_emb: in the fp32 cos and sin's dtype, then `q_embed.to(q_type)`, `k_embed.to(k_type)`
      const qe = applyRotary(rt, q0, cos4, sin4, `${a} query`);
      const ke = applyRotary(rt, k0, cos4, sin4, `${a} key`);
      q = toDType(rt, qe, q0.dtype, `${a} query .to(q_type)`);
      k = toDType(rt, ke, k0.dtype, `${a} key .to(k_type)`);
      cuda.release(qe);
      cuda.release(ke);
    } else if (rope) {
      q = applyRotary(rt, q0, cos4, sin4, `${a} query`);
      k = applyRotary(rt, k0, cos4, sin4, `${a} key`);
    } else {
      q = cuda.ref(q0);
      k = cuda.ref(k0);
    }
    cuda.release(sin4);
    cuda.release(cos4);
    cuda.release(q0);
    cuda.release(k0);
    if (useCache && cfg.slidingWindow !== null) {
      // DynamicCache makes a DynamicSlidingWindowLayer for a model with a sliding window; its first update
      // allocates an int64 scalar, kept with the cache (measured: phi3_4l_amp_bf16_adamw, 8 B per layer and forward)
      cache.push(cuda.empty([], 'int64', `${a} DynamicSlidingWindowLayer int64 scalar`, 'temporary'));
    }
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
      // eager_attention_forward's repeat_kv: expand then reshape, a copy [B, H, T, D], or a view with one
      // key/value head (its own locals: the caller's k and v live on until LlamaAttention.forward returns)
      const rk = repeatKv(rt, k, cfg.heads, `${a} key`);
      const rv = repeatKv(rt, v, cfg.heads, `${a} value`);
      merged = attend(rt, q, rk, rv, { ...call, kvContiguous: cfg.kvHeads !== 1, kvExpanded: cfg.kvHeads === 1 });
      cuda.release(rv);
      cuda.release(rk);
    } else {
      merged = attend(rt, q, k, v, call);
    }
    const out = proj(rt, merged.out, modules.oProj);
    cuda.release(merged.out);
    for (const t of [q, k, v, ...heads.held]) cuda.release(t); // LlamaAttention.forward returns: its locals die
    return [out, merged.weights];
  }

  function mlp(rt: Runtime, x: Tensor, i: number): Tensor {
    const { cuda } = rt;
    const modules = layerModules[i]!;
    const m = modules.mlp;
    if (cfg.fusedProjections) {
      // Phi3MLP: `gate, up = gate_up_proj(x).chunk(2, -1)`; `up = up * act(gate)`; `down_proj(up)`
      const gateUp = proj(rt, x, modules.gateUpProj);
      const [gate, up] = chunk2(rt, gateUp, `${m} gate_up.chunk(2)`);
      cuda.release(gateUp);
      const act = hfActivation(rt, cfg.activation, gate, `${m}.activation_fn`);
      const prod = mul(rt, up, act, `${m} up * act(gate)`);
      cuda.release(act);
      cuda.release(up);
      const out = proj(rt, prod, modules.downProj);
      cuda.release(prod);
      cuda.release(gate);
      return out;
    }
    if (cfg.moe && sparseLayer(i)) {
      const moeWeights = { router: w(`${m}.gate.weight`), gateUp: w(`${m}.experts.gate_up_proj`), down: w(`${m}.experts.down_proj`) };
      return sparseMoeBlock(rt, x, moeWeights, { moe: cfg.moe, activation: cfg.activation, device: options.device }, m);
    }
    const gate = proj(rt, x, modules.gateProj);
    const act = hfActivation(rt, cfg.activation, gate, `${m}.act_fn`);
    cuda.release(gate);
    const up = proj(rt, x, modules.upProj);
    const prod = mul(rt, act, up, `${m} act(gate) * up`);
    cuda.release(up);
    cuda.release(act);
    const out = proj(rt, prod, modules.downProj);
    cuda.release(prod);
    return out;
  }

  /**
   * Olmo2DecoderLayer.forward: `h, _ = self_attn(x)`; `h = post_attention_layernorm(h)`; `h = residual + h`; then
   * `h = mlp(h)`; `h = post_feedforward_layernorm(h)`; `h = residual + h` (each rebinding drops what it replaces).
   */
  function layerNormAfter(rt: Runtime, x: Tensor, i: number, cos: Tensor, sin: Tensor, mask: Tensor | null): Tensor {
    const { cuda } = rt;
    const modules = layerModules[i]!;
    const l = modules.layer;
    const [attnOut, weights] = attention(rt, x, i, cos, sin, mask);
    const normed = rmsNorm(rt, attnOut, w(modules.postAttentionLayernormWeight), modules.postAttentionLayernorm);
    cuda.release(attnOut);
    const hidden = addTensors(rt, x, normed, `${l} residual + attention`);
    cuda.release(normed);
    const mlpOut = mlp(rt, hidden, i);
    const normed2 = rmsNorm(rt, mlpOut, w(`${l}.post_feedforward_layernorm.weight`), `${l}.post_feedforward_layernorm`);
    cuda.release(mlpOut);
    const out = addTensors(rt, hidden, normed2, `${l} residual + mlp`);
    cuda.release(normed2);
    cuda.release(hidden);
    cuda.release(weights);
    return out;
  }

  function layer(rt: Runtime, x: Tensor, i: number, cos: Tensor, sin: Tensor, mask: Tensor | null): Tensor {
    if (cfg.normAfter) return layerNormAfter(rt, x, i, cos, sin, mask);
    const { cuda } = rt;
    const modules = layerModules[i]!;
    const l = modules.layer;
    const normed = rmsNorm(rt, x, w(modules.inputLayernormWeight), modules.inputLayernorm);
    // `hidden_states, _ = self.self_attn(...)`: `_` holds the attention weights until the layer returns
    const [attnOut0, weights] = attention(rt, normed, i, cos, sin, mask);
    cuda.release(normed);
    // Phi-3: `residual + self.resid_attn_dropout(hidden_states)` (resid_pdrop 0: the same tensor)
    const attnOut = dropout(rt, attnOut0, cfg.residDropout, `${l}.resid_attn_dropout`);
    cuda.release(attnOut0);
    const hidden = addTensors(rt, x, attnOut, `${l} residual + attention`);
    cuda.release(attnOut);
    const normed2 = rmsNorm(rt, hidden, w(modules.postAttentionLayernormWeight), modules.postAttentionLayernorm);
    const mlpOut0 = mlp(rt, normed2, i);
    cuda.release(normed2);
    const mlpOut = dropout(rt, mlpOut0, cfg.residDropout, `${l}.resid_mlp_dropout`);
    cuda.release(mlpOut0);
    const out = addTensors(rt, hidden, mlpOut, `${l} residual + mlp`);
    cuda.release(mlpOut);
    cuda.release(hidden);
    cuda.release(weights);
    return out;
  }

  /** LlamaRotaryEmbedding.forward under no_grad: fp32 math, then cos and sin in the hidden states' dtype. */
  function rotaryEmbedding(rt: Runtime, t: number, hiddenDType: DType): [Tensor, Tensor] {
    if (cfg.longropeOriginalMax !== null) longropeFrequencyUpdate(rt, weights, t, cfg.rotaryDim, cfg.longropeOriginalMax);
    // OLMo 2's returns cos and sin as computed, fp32
    return rotaryCosSin(rt, w('model.rotary_emb.inv_freq'), t, cfg.rotaryDim, cfg.normAfter ? 'float32' : hiddenDType);
  }

  return {
    parameters: params,
    tiedModules: !score && cfg.tieWordEmbeddings ? ['lm_head'] : [],
    // the head reads its weight as lm_head's (a modules_to_save copy of either module runs in that module only)
    inputEmbeddings: 'model.embed_tokens',
    tiedWeights: !score && cfg.tieWordEmbeddings ? { 'lm_head.weight': 'model.embed_tokens.weight' } : {},
    // each layer's activation (Phi-3's `activation_fn`, its residual dropouts; a mixture of experts' in `experts`),
    // a token classifier's dropout
    parameterlessModules: [
      ...Array.from({ length: cfg.layers }, (_, i) => {
        const l = `model.layers.${i}`;
        if (cfg.fusedProjections) return [`${l}.mlp.activation_fn`, `${l}.resid_attn_dropout`, `${l}.resid_mlp_dropout`];
        return [sparseLayer(i) ? `${l}.mlp.experts.act_fn` : `${l}.mlp.act_fn`];
      }).flat(),
      ...(tokenClassifier ? ['dropout'] : []),
    ],
    tensors: weights,
    makeInputs: (rt, batch) => headInputs(rt, batch, seqLen, cfg.head),
    loss(rt, [ids, labels]) {
      const { cuda } = rt;
      const [b, t] = ids!.shape as [number, number];
      const inputsEmbeds = embedding(rt, w('model.embed_tokens.weight'), ids!, 'model.embed_tokens');
      inputsRequireGrad?.hook(rt, inputsEmbeds);
      const positions = positionIds(rt, t);
      if (!useCache) findPackedSequenceIndices(rt, b, t);
      // Mistral's and Phi-3's eager mask is the window's at any length
      const mask =
        options.attention !== 'eager' ? (windowMask ? slidingWindowMask(rt, b, t) : null)
        : eagerWindow ? eagerSlidingWindowMask(rt, b, t, inputsEmbeds.dtype)
        : eagerCausalMask(rt, b, t, inputsEmbeds.dtype);
      const [cos, sin] = rotaryEmbedding(rt, t, inputsEmbeds.dtype);
      let hidden = runBlocks(rt, cuda.ref(inputsEmbeds), cfg.layers, checkpointing, (x, i) => layer(rt, x, i, cos, sin, mask), [mask, cos, sin, positions], reuse);
      reentrantClosures?.hold(rt, [mask, cos, sin, positions]);
      const normed = rmsNorm(rt, hidden, w('model.norm.weight'), 'model.norm');
      cuda.release(hidden);
      hidden = normed;
      // LlamaModel.forward returns: its locals die
      for (const x of [sin, cos, mask, positions, inputsEmbeds]) cuda.release(x);
      if (classifier && score) return decoderClassifierLoss(rt, hidden, w(score.weight), labels!, classifier, cache);
      if (tokenClassifier && score) return decoderTokenClassifierLoss(rt, hidden, w(score.weight), score.bias ? w(score.bias) : null, labels!, tokenClassifier, cache);
      const logits = proj(rt, hidden, 'lm_head');
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

/**
 * A decoder layer's module names, made once per model: a forward would otherwise build each again at every call,
 * and look it up by a string hashed anew each time.
 */
function layerModuleNames(i: number) {
  const layer = `model.layers.${i}`;
  const attn = `${layer}.self_attn`;
  const mlp = `${layer}.mlp`;
  return {
    layer,
    attn,
    mlp,
    qProj: `${attn}.q_proj`,
    kProj: `${attn}.k_proj`,
    vProj: `${attn}.v_proj`,
    oProj: `${attn}.o_proj`,
    qkvProj: `${attn}.qkv_proj`,
    qNorm: `${attn}.q_norm.weight`,
    kNorm: `${attn}.k_norm.weight`,
    gateProj: `${mlp}.gate_proj`,
    upProj: `${mlp}.up_proj`,
    downProj: `${mlp}.down_proj`,
    gateUpProj: `${mlp}.gate_up_proj`,
    inputLayernorm: `${layer}.input_layernorm`,
    inputLayernormWeight: `${layer}.input_layernorm.weight`,
    postAttentionLayernorm: `${layer}.post_attention_layernorm`,
    postAttentionLayernormWeight: `${layer}.post_attention_layernorm.weight`,
  };
}
type LayerModuleNames = ReturnType<typeof layerModuleNames>;

/** `t.chunk(2, dim=-1)`: two views; SplitBackward0 concatenates their gradients (a zero tensor for a missing one). */
function chunk2(rt: Runtime, t: Tensor, label: string): [Tensor, Tensor] {
  const { cuda, autograd } = rt;
  const half = [...t.shape.slice(0, -1), t.shape[t.shape.length - 1]! / 2];
  const a = cuda.view(t, half);
  const b = cuda.view(t, half);
  autograd.record('SplitBackward0', [t], [a, b], [], (grads) => {
    if (!grads.some((g) => g)) return [null];
    const zeros = grads.map((g) => (g ? null : cuda.empty(half, t.dtype, `${label} backward: zeros for a missing gradient`)));
    const out = cuda.empty(t.shape, grads.find((g) => g)!.dtype, `grad of ${label}`);
    for (const z of zeros) cuda.release(z);
    return [out];
  });
  return [a, b];
}
