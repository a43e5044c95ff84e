/**
 * `GPT2LMHeadModel` (transformers 5.x modeling_gpt2.py) trained as `model(input_ids=ids, labels=ids).loss`.
 * Parameters in `Module._apply` order: wte, wpe, per block ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc,
 * mlp.c_proj (weight then bias; Conv1D weights stored [in, out]), ln_f; lm_head is wte (tied), moved once; no
 * buffers. `config.use_cache` (true by default) makes a DynamicCache in training too, whose K/V copies every
 * layer's attention then uses; gradient checkpointing turns it off.
 * LoRA: PEFT wraps a targeted `Conv1D` as it wraps an `nn.Linear` (peft/tuners/lora/layer.py `dispatch_default`:
 * `Linear(..., fan_in_fan_out=True, is_target_conv_1d_layer=True)`), in and out features read from the [in, out]
 * weight; fan_in_fan_out only transposes the weight when merging, so the forward is `lora.Linear`'s
 * (models/peft/lora.ts `loraForward`). PEFT's default target for gpt2 is `c_attn`.
 */
import type { AttentionDevice } from '../../ops/attention.ts';
import { embedding } from '../../ops/embedding.ts';
import { addTensors } from '../../ops/elementwise.ts';
import { conv1d, linear } from '../../ops/linear.ts';
import { layerNorm } from '../../ops/norm.ts';
import { dropout } from '../../ops/pointwise.ts';
import type { Runtime } from '../../ops/runtime.ts';
import type { DType } from '../../tensor/dtype.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type { Checkpointing } from '../checkpointing.ts';
import type { ParameterSpec, TrainableModel } from '../model.ts';
import { attend, cacheUpdate, eagerCausalMask, findPackedSequenceIndices, gradCopies, splitHeads, type AttentionImpl } from './attention.ts';
import { causalLmLoss, hfActivation, positionIds, tokenInputs } from './common.ts';
import type { Gpt2Config } from './config.ts';
import type { BlockReuse } from '../block-reuse.ts';
import { ReentrantClosures, runBlocks } from '../checkpointing.ts';
import { FULL_FINE_TUNING, InputsRequireGrad, linearModules, loraAdapterParameters, type FineTuning } from '../peft/lora.ts';

export interface HfModelOptions {
  dtype: DType;
  seqLen: number;
  attention: AttentionImpl;
  checkpointing: Checkpointing;
  device: AttentionDevice;
  /** LoRA and frozen parameters (models/peft/lora.ts); full fine-tuning when absent. */
  tuning?: FineTuning;
}

export function gpt2Model(cfg: Gpt2Config, options: HfModelOptions): TrainableModel {
  const { dtype, seqLen, checkpointing } = options;
  const tuning = options.tuning ?? FULL_FINE_TUNING;
  const e = cfg.hidden;
  const params: ParameterSpec[] = [];
  const p = (name: string, shape: number[]) => params.push({ name, shape, dtype });
  /** A `Conv1D` at `path` ([in, out] weight, a bias), and the LoRA adapter PEFT adds after them when it is a target. */
  const conv1dModule = (path: string, inFeatures: number, outFeatures: number) => {
    params.push({ name: `${path}.weight`, shape: [inFeatures, outFeatures], dtype, loraModule: 'Conv1D' });
    params.push({ name: `${path}.bias`, shape: [outFeatures], dtype });
    params.push(...loraAdapterParameters(path, inFeatures, outFeatures, tuning));
  };
  p('transformer.wte.weight', [cfg.vocabSize, e]);
  p('transformer.wpe.weight', [cfg.positions, e]);
  /** Each block's parameters, as [first, end) of `params` (Note [Reused blocks]: a block's weights). */
  const blockParams: [number, number][] = [];
  for (let i = 0; i < cfg.layers; i++) {
    const first = params.length;
    const h = `transformer.h.${i}`;
    p(`${h}.ln_1.weight`, [e]);
    p(`${h}.ln_1.bias`, [e]);
    conv1dModule(`${h}.attn.c_attn`, e, 3 * e);
    conv1dModule(`${h}.attn.c_proj`, e, e);
    p(`${h}.ln_2.weight`, [e]);
    p(`${h}.ln_2.bias`, [e]);
    conv1dModule(`${h}.mlp.c_fc`, e, cfg.inner);
    conv1dModule(`${h}.mlp.c_proj`, cfg.inner, e);
    blockParams.push([first, params.length]);
  }
  p('transformer.ln_f.weight', [e]);
  p('transformer.ln_f.bias', [e]);
  const weights = new Map<string, Tensor>();
  const w = (name: string) => weights.get(name)!;
  /** `module(x)` for the Conv1D at `path`: with its LoRA adapter when it has one. */
  const conv = linearModules(weights, tuning.lora, (rt, x, weight, bias, label) => conv1d(rt, x, weight, bias!, label));
  const inputsRequireGrad = InputsRequireGrad.of(tuning, checkpointing);
  const reentrantClosures = ReentrantClosures.of(checkpointing);
  const heads = cfg.heads;
  const headDim = e / heads;
  // gradient checkpointing forces use_cache=False
  const useCache = cfg.useCache && !checkpointing;
  /** The DynamicCache's keys and values of the current forward. */
  const cache: Tensor[] = [];
  // Note [Reused blocks]: every GPT2Block runs the same code on the same shapes
  const reuse: BlockReuse = { kind: () => 'GPT2Block', name: (i) => `transformer.h.${i}`, weights: (i) => params.slice(...blockParams[i]!).map((spec) => w(spec.name)), kept: cache };

  /** GPT2Attention.forward: (attn_output, attn_weights). */
  function attention(rt: Runtime, x: Tensor, i: number, mask: Tensor | null): [Tensor, Tensor | null] {
    const { cuda } = rt;
    const h = `transformer.h.${i}.attn`;
    const call = {
      impl: options.attention,
      device: options.device,
      dropoutP: cfg.attnDropout,
      mask,
      kvContiguous: useCache,
      softmaxFp32: false,
      probsCast: 'value' as const,
      castApart: true,
      label: `${h} attention`,
    };
    const qkv = conv(rt, x, `${h}.c_attn`);
    const parts = splitLastDim(rt, qkv, 3);
    cuda.release(qkv); // the temporary `self.c_attn(hidden_states)`: its views keep it
    const copies = gradCopies(qkv, call);
    let k = splitHeads(rt, parts[1], heads, headDim, copies.k, `${h} key`);
    let v = splitHeads(rt, parts[2], heads, headDim, copies.v, `${h} value`);
    const q = splitHeads(rt, parts[0], heads, headDim, copies.q, `${h} query`);
    for (const t of parts) cuda.release(t);
    if (useCache) {
      const [kc, vc] = cacheUpdate(rt, k, v, h);
      cuda.release(k);
      cuda.release(v);
      k = kc;
      v = vc;
      cache.push(cuda.ref(k), cuda.ref(v)); // the DynamicCache keeps them until the output is dropped
    }
    const { out: merged, weights } = attend(rt, q, k, v, call);
    const proj = conv(rt, merged, `${h}.c_proj`);
    cuda.release(merged);
    const out = dropout(rt, proj, cfg.residDropout, `${h}.resid_dropout`);
    cuda.release(proj);
    for (const t of [q, k, v]) cuda.release(t); // GPT2Attention.forward returns: its locals die
    return [out, weights];
  }

  function mlp(rt: Runtime, x: Tensor, i: number): Tensor {
    const { cuda } = rt;
    const m = `transformer.h.${i}.mlp`;
    const fc = conv(rt, x, `${m}.c_fc`);
    const act = hfActivation(rt, cfg.activation, fc, `${m}.act`);
    cuda.release(fc);
    const proj = conv(rt, act, `${m}.c_proj`);
    cuda.release(act);
    const out = dropout(rt, proj, cfg.residDropout, `${m}.dropout`);
    cuda.release(proj);
    return out;
  }

  function block(rt: Runtime, x: Tensor, i: number, mask: Tensor | null): Tensor {
    const { cuda } = rt;
    const b = `transformer.h.${i}`;
    const ln1 = layerNorm(rt, x, w(`${b}.ln_1.weight`), w(`${b}.ln_1.bias`), `${b}.ln_1`);
    // `attn_output, _ = self.attn(...)`: `_` holds the attention weights until the block returns
    const [attnOut, weights] = attention(rt, ln1, i, mask);
    const hidden = addTensors(rt, attnOut, x, `${b} attn_output + residual`);
    cuda.release(ln1);
    const ln2 = layerNorm(rt, hidden, w(`${b}.ln_2.weight`), w(`${b}.ln_2.bias`), `${b}.ln_2`);
    const ff = mlp(rt, ln2, i);
    const out = addTensors(rt, hidden, ff, `${b} residual + feed_forward`);
    cuda.release(ln2);
    // the block returns: its locals die
    cuda.release(attnOut);
    cuda.release(ff);
    cuda.release(hidden);
    cuda.release(weights);
    return out;
  }

  return {
    parameters: params,
    tiedModules: ['lm_head'],
    // lm_head reads its weight by its own name (a modules_to_save copy of wte or lm_head runs in that module only)
    inputEmbeddings: 'transformer.wte',
    tiedWeights: { 'lm_head.weight': 'transformer.wte.weight' },
    // the embeddings' dropout; each block's attention and residual dropouts, its MLP's activation and dropout
    parameterlessModules: [
      'transformer.drop',
      ...Array.from({ length: cfg.layers }, (_, i) => ['attn.attn_dropout', 'attn.resid_dropout', 'mlp.act', 'mlp.dropout'].map((m) => `transformer.h.${i}.${m}`)).flat(),
    ],
    tensors: weights,
    makeInputs: (rt, batch) => tokenInputs(rt, batch, seqLen),
    loss(rt, [ids]) {
      const { cuda } = rt;
      const [b, t] = ids!.shape as [number, number];
      const inputsEmbeds = embedding(rt, w('transformer.wte.weight'), ids!, 'transformer.wte');
      inputsRequireGrad?.hook(rt, inputsEmbeds);
      const positions = positionIds(rt, t);
      const positionEmbeds = embedding(rt, w('transformer.wpe.weight'), positions, 'transformer.wpe');
      const summed = addTensors(rt, inputsEmbeds, positionEmbeds, 'inputs_embeds + position_embeds');
      // create_causal_mask: the packed-sequence check runs when there is no cache (gradient checkpointing)
      if (!useCache) findPackedSequenceIndices(rt, b, t);
      const mask = options.attention === 'eager' ? eagerCausalMask(rt, b, t, dtype) : null;
      let hidden = dropout(rt, summed, cfg.embdDropout, 'transformer.drop');
      cuda.release(summed);
      // GPT2Model calls each block with the mask positional (reentrant checkpointing saves it with the hidden
      // states) and the position ids by keyword (the closure; cache_position, positional too, is their storage)
      hidden = runBlocks(rt, hidden, cfg.layers, checkpointing, (x, i) => block(rt, x, i, mask), [mask, positions], reuse, mask ? [mask] : []);
      reentrantClosures?.hold(rt, [positions]);
      const normed = layerNorm(rt, hidden, w('transformer.ln_f.weight'), w('transformer.ln_f.bias'), 'transformer.ln_f');
      cuda.release(hidden);
      // GPT2Model.forward returns: its locals die
      for (const t of [mask, positions, positionEmbeds, inputsEmbeds]) cuda.release(t);
      const logits = linear(rt, normed, w('lm_head.weight'), null, 'lm_head');
      const loss = causalLmLoss(rt, logits, ids!);
      cuda.release(normed); // GPT2LMHeadModel.forward returns
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
 * `t.split(n, dim=-1)` into equal parts: views; SplitBackward0 builds the input's gradient with one `cat` of the
 * parts' gradients (missing ones as zeros).
 */
export function splitLastDim(rt: Runtime, t: Tensor, parts: number): [Tensor, Tensor, Tensor] {
  const { cuda, autograd } = rt;
  const size = t.shape[t.shape.length - 1]! / parts;
  const shape = [...t.shape.slice(0, -1), size];
  const outs = Array.from({ length: parts }, () => cuda.view(t, shape));
  autograd.record('SplitBackward0', [t], outs, [], (grads) => [grads.some((g) => g) ? cuda.empty(t.shape, grads.find((g) => g)!.dtype, 'grad of split (cat)') : null]);
  return outs as [Tensor, Tensor, Tensor];
}
