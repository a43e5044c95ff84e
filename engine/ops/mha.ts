/**
 * `nn.MultiheadAttention(E, H, batch_first=True)(x, x, x, need_weights=False)` in training
 * (torch/nn/functional.py `multi_head_attention_forward`, dropout 0), as memory sees it. Measured on the H100
 * with C++ stacks (test/fixtures/probes):
 * - x is transposed to [L, B, E] (a view); `_in_projection_packed` runs `linear(x, in_proj_weight, in_proj_bias)`
 *   on that non-contiguous input: matmul (its fold reshapes the input: a copy) then `output.add_(bias)`;
 *   `proj.unflatten(-1, (3, E)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()` copies it to
 *   [3, L, B, E] and the projection dies; q, k, v are `proj[0..2]` (SelectBackward0: a zero-filled [3, L, B, E]
 *   each in backward);
 * - SDPA on [B, H, L, D] views whose memory is [L, B, H, D]. cuDNN (and flash) attention allocate the output in
 *   the query's memory order, so `permute(2, 0, 1, 3).contiguous()` copies nothing; memory-efficient attention
 *   (fp32) always allocates [B, L, H, D] (attention.cu `_efficient_attention_forward`), so the `.contiguous()`
 *   copies it to [L, B, H, D] (CloneBackward0), and that copy is what out_proj saves. Its gradient comes back to
 *   the attention in [L, B, H, D] order, which `_efficient_attention_backward` copies (`grad_out_.contiguous()`);
 *   `out_proj` is an addmm on [L*B, E];
 * - the result is viewed [L, B, E] and transposed back: its gradient arrives transposed, and the view's backward
 *   copies it.
 */
import type { Tensor } from '../tensor/tensor.ts';
import { scaledDotProductAttention, sdpaBackend, type AttentionDevice } from './attention.ts';
import { castLower } from './autocast.ts';
import { copy, matmul, viewCopyingGrad } from './matmul.ts';
import { linear } from './linear.ts';
import type { Runtime } from './runtime.ts';

export interface MhaWeights {
  inProjWeight: Tensor;
  inProjBias: Tensor;
  outProjWeight: Tensor;
  outProjBias: Tensor;
}

export function multiHeadSelfAttention(rt: Runtime, x: Tensor, w: MhaWeights, heads: number, device: AttentionDevice, label: string): Tensor {
  const { cuda, autograd } = rt;
  const [b, l, e] = x.shape as [number, number, number];
  const d = e / heads;
  const xT = autograd.transpose(x, 0, 1); // [L, B, E] over [B, L, E] memory: its gradient comes back transposed
  const proj = linearNonContiguous(rt, xT, w.inProjWeight, w.inProjBias, `${label} in_proj`);
  cuda.release(xT);
  // unflatten / unsqueeze / transpose / squeeze: views whose gradient comes back as a copy, then .contiguous()
  const viewed = viewCopyingGrad(rt, proj, [3, l, b, e], `${label} in_proj (unflattened)`, 'UnflattenBackward0');
  cuda.release(proj);
  const packed = copy(rt, viewed, [3, l, b, e], `${label} q, k, v (contiguous)`);
  cuda.release(viewed);
  // the backend SDPA will take (under autocast the projection is already in the lower dtype)
  const backend = sdpaBackend(packed.dtype, heads, heads, device);
  // q, k, v = proj[0..2]; `q.view(L, B*H, D).transpose(0, 1)` for each, then `q.view(B, H, L, D)` for each (the
  // order of multi_head_attention_forward, which orders their nodes in backward). Memory-efficient attention's
  // gradients are [B, L, H, D] memory: both ViewBackward0 reshapes copy them. cuDNN's follow the query's memory
  // order: views.
  const names = ['q', 'k', 'v'].map((n) => `${label} ${n}`);
  const parts = [0, 1, 2].map((i) => selectView(rt, packed, [l, b, e], names[i]!));
  const headsFirst = parts.map((part, i) => {
    if (backend !== 'efficient') return part;
    const split = viewCopyingGrad(rt, part, [l, b * heads, d], names[i]!, 'ViewBackward0');
    cuda.release(part);
    const t = autograd.view('TransposeBackward0', split, [b * heads, l, d]);
    cuda.release(split);
    return t;
  });
  const [q, k, v] = headsFirst.map((t, i) => {
    const heads4 = backend === 'efficient' ? viewCopyingGrad(rt, t, [b, heads, l, d], names[i]!, 'ViewBackward0') : autograd.view('ViewBackward0', t, [b, heads, l, d]);
    cuda.release(t);
    return heads4;
  }) as [Tensor, Tensor, Tensor];
  cuda.release(packed);
  const [qc, kc, vc] = castLower(rt, [q, k, v], [`${label} q`, `${label} k`, `${label} v`]);
  const out = scaledDotProductAttention(rt, qc!, kc!, vc!, backend, { dropoutP: 0, causal: false, gradInQueryOrder: true, label: `${label} attention` });
  for (const t of [qc, kc, vc]) cuda.release(t);
  // attn_output.permute(2, 0, 1, 3).contiguous(): a copy unless the output is in the query's [L, B, H, D] order
  const ordered = backend === 'efficient' ? copy(rt, out, [l, b, heads, d], `${label} attention output (contiguous)`) : cuda.ref(out);
  cuda.release(out);
  const flat = autograd.view('ViewBackward0', ordered, [l * b, e]);
  cuda.release(ordered);
  const projected = linear(rt, flat, w.outProjWeight, w.outProjBias, `${label} out_proj`);
  cuda.release(flat);
  // The result's gradient comes back through the transpose in the memory order it arrived in: a contiguous [B, L, E]
  // one is [L, B, E] transposed, and the view's reshape copies it; one in [L, B, E] memory (a ViT's residual stream
  // under reentrant checkpointing, from the layer above) is viewed (measured on the H100)
  const lbe = autograd.view('ViewBackward0', projected, [l, b, e], `grad of ${label} out_proj (viewed) (reshaped)`);
  cuda.release(projected);
  const result = autograd.transpose(lbe, 0, 1); // [B, L, E] over [L, B, E] memory
  cuda.release(lbe);
  for (const t of [q, k, v]) cuda.release(t); // multi_head_attention_forward returns: its locals die
  return result;
}

/** `t[i]` of the first dimension: a view; SelectBackward0 builds a zero tensor of t's shape and copies in. */
function selectView(rt: Runtime, t: Tensor, shape: readonly number[], label: string): Tensor {
  const { cuda, autograd } = rt;
  const out = cuda.view(t, shape);
  autograd.record('SelectBackward0', [t], [out], [], ([grad]) => [grad ? cuda.empty(t.shape, grad.dtype, `grad of ${label} (select)`) : null]);
  return out;
}

/**
 * `F.linear(x, weight, bias)` for a non-contiguous 3-d x (Linear.cpp): `matmul(x, weight.t())` (the fold
 * reshapes x: a copy, which mm saves) then `output.add_(bias)` in place (AddBackward0: the bias's gradient is
 * the output's summed). Under autocast the arguments are cast first, right to left.
 */
function linearNonContiguous(rt: Runtime, x: Tensor, weight: Tensor, bias: Tensor, label: string): Tensor {
  const { cuda, autograd } = rt;
  const [xc, wc, bc] = rt.autocast ? castLower(rt, [x, weight, bias], [`${label} input`, `${label} weight`, `${label} bias`]) : [cuda.ref(x), cuda.ref(weight), cuda.ref(bias)];
  const wT = autograd.view('TBackward0', wc!, [wc!.shape[1]!, wc!.shape[0]!]);
  const out = matmul(rt, xc!, wT, { aContiguous: false, bContiguous: true }, label);
  cuda.release(wT);
  // output.add_(bias): the same storage, a new grad_fn
  const added = cuda.ref(out);
  autograd.record('AddBackward0', [out, bc!], [added], [], ([grad]) => (grad ? [cuda.ref(grad), cuda.ref(grad)] : [null, null]));
  cuda.release(out);
  for (const t of [xc, wc, bc]) cuda.release(t);
  return added;
}
