/**
 * torchvision's VisionTransformer (vision_transformer.py): vit_b_16 (hidden 768, 12 layers, 12 heads, MLP 3072)
 * and vit_l_16 (1024, 24, 16, 4096), dropout 0. Parameters in `Module._apply` order: conv_proj, the encoder
 * layers (ln_1, self_attention: out_proj then in_proj, ln_2, mlp.0, mlp.3), encoder.ln, encoder.pos_embedding,
 * heads.head, class_token; `named_parameters()` lists each module's own parameters first.
 * Forward: the patch convolution viewed [B, N, E]; `cat([class_token.expand(B, -1, -1), x], 1)` (the promoted
 * dtype: fp32 under autocast); `+ pos_embedding`; per layer `x = ln_1(input)`, `x = self_attention(x, x, x)`,
 * `x = x + input`, `y = mlp(ln_2(x))`, `x + y`; encoder.ln; `heads(x[:, 0])`.
 * Memory order (measured on the H100): the attention output is a transposed view, so `x + input` and every
 * later residual sum are [N, B, E] in memory: the layer norms that read them copy them to contiguous first
 * (and again in backward), and ln_1's gradient comes back transposed.
 */
import { InputError } from '../errors.ts';
import { conv2d, type Conv2dSpec } from '../ops/conv.ts';
import { addTensors, cat, promote } from '../ops/elementwise.ts';
import { linear } from '../ops/linear.ts';
import { crossEntropy } from '../ops/loss.ts';
import { multiHeadSelfAttention } from '../ops/mha.ts';
import { layerNorm } from '../ops/norm.ts';
import { activation } from '../ops/pointwise.ts';
import type { Runtime } from '../ops/runtime.ts';
import type { Tensor } from '../tensor/tensor.ts';
import type { BlockReuse } from './block-reuse.ts';
import { runBlocks } from './checkpointing.ts';
import type { ParameterSpec, TrainableModel } from './model.ts';
import type { VisionOptions } from './torchvision.ts';

const VITS: Record<string, { hidden: number; layers: number; heads: number; mlp: number; patch: number }> = {
  vit_b_16: { hidden: 768, layers: 12, heads: 12, mlp: 3072, patch: 16 },
  vit_l_16: { hidden: 1024, layers: 24, heads: 16, mlp: 4096, patch: 16 },
};

export function visionTransformer(name: string, options: VisionOptions): TrainableModel {
  const found = VITS[name];
  if (!found) throw new InputError('model.torchvision', `"${name}" is not simulated yet`);
  const arch = found;
  const { dtype, imageSize, checkpointing } = options;
  if (imageSize % arch.patch !== 0) throw new InputError('training.image_size', `must be a multiple of the patch size ${arch.patch} for ${name}`);
  const e = arch.hidden;
  const patches = (imageSize / arch.patch) ** 2;
  const seq = patches + 1;
  const patchConv: Conv2dSpec = { inChannels: 3, outChannels: e, kernel: arch.patch, stride: arch.patch, padding: 0 };
  const params: ParameterSpec[] = [];
  const named: string[] = ['class_token', 'conv_proj.weight', 'conv_proj.bias', 'encoder.pos_embedding'];
  const p = (name: string, shape: number[]) => params.push({ name, shape, dtype });
  p('conv_proj.weight', [e, 3, arch.patch, arch.patch]);
  p('conv_proj.bias', [e]);
  /** Each layer's parameters, as [first, end) of `params` (Note [Reused blocks]: a layer's weights). */
  const layerParams: [number, number][] = [];
  for (let i = 0; i < arch.layers; i++) {
    const first = params.length;
    const l = `encoder.layers.encoder_layer_${i}`;
    p(`${l}.ln_1.weight`, [e]);
    p(`${l}.ln_1.bias`, [e]);
    p(`${l}.self_attention.out_proj.weight`, [e, e]);
    p(`${l}.self_attention.out_proj.bias`, [e]);
    p(`${l}.self_attention.in_proj_weight`, [3 * e, e]);
    p(`${l}.self_attention.in_proj_bias`, [3 * e]);
    p(`${l}.ln_2.weight`, [e]);
    p(`${l}.ln_2.bias`, [e]);
    p(`${l}.mlp.0.weight`, [arch.mlp, e]);
    p(`${l}.mlp.0.bias`, [arch.mlp]);
    p(`${l}.mlp.3.weight`, [e, arch.mlp]);
    p(`${l}.mlp.3.bias`, [e]);
    layerParams.push([first, params.length]);
    named.push(
      ...['ln_1.weight', 'ln_1.bias', 'self_attention.in_proj_weight', 'self_attention.in_proj_bias', 'self_attention.out_proj.weight', 'self_attention.out_proj.bias'].map((n) => `${l}.${n}`),
      ...['ln_2.weight', 'ln_2.bias', 'mlp.0.weight', 'mlp.0.bias', 'mlp.3.weight', 'mlp.3.bias'].map((n) => `${l}.${n}`),
    );
  }
  p('encoder.ln.weight', [e]);
  p('encoder.ln.bias', [e]);
  p('encoder.pos_embedding', [1, seq, e]);
  p('heads.head.weight', [options.numClasses, e]);
  p('heads.head.bias', [options.numClasses]);
  p('class_token', [1, 1, e]);
  named.push('encoder.ln.weight', 'encoder.ln.bias', 'heads.head.weight', 'heads.head.bias');
  const weights = new Map<string, Tensor>();
  const w = (name: string) => weights.get(name)!;
  // Note [Reused blocks]: every encoder layer runs the same code on the same shapes, but the first, whose input is
  // not a residual sum
  const reuse: BlockReuse = {
    kind: (i) => (i === 0 ? 'first' : 'encoder_layer'),
    name: (i) => `encoder.layers.encoder_layer_${i}`,
    weights: (i) => params.slice(...layerParams[i]!).map((spec) => w(spec.name)),
  };

  function encoderLayer(rt: Runtime, input: Tensor, i: number): Tensor {
    const { cuda } = rt;
    const l = `encoder.layers.encoder_layer_${i}`;
    // every layer input but the first is a residual sum in [N, B, E] memory (its memory order: the norm copies it)
    const x1 = layerNorm(rt, input, w(`${l}.ln_1.weight`), w(`${l}.ln_1.bias`), `${l}.ln_1`);
    const attn = multiHeadSelfAttention(
      rt,
      x1,
      { inProjWeight: w(`${l}.self_attention.in_proj_weight`), inProjBias: w(`${l}.self_attention.in_proj_bias`), outProjWeight: w(`${l}.self_attention.out_proj.weight`), outProjBias: w(`${l}.self_attention.out_proj.bias`) },
      arch.heads,
      options.device,
      `${l}.self_attention`,
    );
    cuda.release(x1);
    const x = addTensors(rt, attn, input, `${l} x + input`);
    cuda.release(attn);
    const y1 = layerNorm(rt, x, w(`${l}.ln_2.weight`), w(`${l}.ln_2.bias`), `${l}.ln_2`);
    // `y = self.mlp(y)`: the Sequential drops each intermediate, the block's y lives until mlp returns
    const h = linear(rt, y1, w(`${l}.mlp.0.weight`), w(`${l}.mlp.0.bias`), `${l}.mlp.0`);
    const g = activation(rt, 'gelu', h, `${l}.mlp.1`);
    cuda.release(h);
    const y = linear(rt, g, w(`${l}.mlp.3.weight`), w(`${l}.mlp.3.bias`), `${l}.mlp.3`);
    cuda.release(g);
    cuda.release(y1);
    const out = addTensors(rt, x, y, `${l} x + y`);
    cuda.release(y);
    cuda.release(x);
    return out;
  }

  return {
    parameters: params,
    optimizerOrder: named,
    tensors: weights,
    makeInputs(rt, batch) {
      const x = rt.cuda.empty([batch, 3, imageSize, imageSize], dtype, 'images x', 'input');
      const y = rt.cuda.empty([batch], 'int64', 'labels y', 'input');
      return [x, y];
    },
    loss(rt, [images, labels]) {
      const { cuda, autograd } = rt;
      const b = images!.shape[0]!;
      const conv = conv2d(rt, images!, w('conv_proj.weight'), w('conv_proj.bias'), patchConv, options.convWorkspaces, 'conv_proj', false);
      const tokens = autograd.view('PermuteBackward0', conv, [b, patches, e]);
      cuda.release(conv);
      // class_token.expand(B, -1, -1): ExpandBackward0 sums the gradient back to [1, 1, E]
      const token = w('class_token');
      const classToken = cuda.view(token, [b, 1, e]);
      autograd.record('ExpandBackward0', [token], [classToken], [], ([grad]) => [grad ? cuda.sumTo(grad, token.shape, 'grad of class_token') : null]);
      const joined = cat(rt, [classToken, tokens], [b, seq, e], 'cat(class_token, x)', promote(classToken.dtype, tokens.dtype));
      cuda.release(classToken);
      cuda.release(tokens);
      // `x = self.encoder(x)`: the caller's x (the cat) lives until the encoder returns
      const withPos = addTensors(rt, joined, w('encoder.pos_embedding'), 'input + pos_embedding');
      const h = runBlocks(rt, withPos, arch.layers, checkpointing, (x, i) => encoderLayer(rt, x, i), [], reuse);
      const normed = layerNorm(rt, h, w('encoder.ln.weight'), w('encoder.ln.bias'), 'encoder.ln');
      cuda.release(h);
      cuda.release(joined);
      const first = cuda.view(normed, [b, e]);
      autograd.record('SelectBackward0', [normed], [first], [], ([grad]) => [grad ? cuda.empty(normed.shape, grad.dtype, 'grad of x[:, 0]') : null]);
      cuda.release(normed);
      const logits = linear(rt, first, w('heads.head.weight'), w('heads.head.bias'), 'heads.head');
      cuda.release(first);
      const loss = crossEntropy(rt, logits, labels!);
      cuda.release(logits);
      return loss;
    },
  };
}
