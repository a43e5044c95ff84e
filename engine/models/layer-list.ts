/**
 * A plan's layer list as the PyTorch modules memplan's measurement script builds (`nn.Sequential`-like
 * `LayerList`; `residual` = `x + body(x)`; `repeat` = copies of a body), trained with
 * `F.cross_entropy(out.reshape(-1, C), y.reshape(-1))`.
 *
 * Python reference semantics decide when memory is freed: `for m in layers: x = m(x)` drops each layer's input
 * as soon as the next output exists (unless autograd saved it); the caller keeps the model's input.
 */
import { InputError } from '../errors.ts';
import type { LayerSpec } from '../plan/schema.ts';
import { activation, add, dropout } from '../ops/pointwise.ts';
import { linear } from '../ops/linear.ts';
import { layerNorm, rmsNorm } from '../ops/norm.ts';
import { crossEntropy } from '../ops/loss.ts';
import type { Runtime } from '../ops/runtime.ts';
import { rerunUnderAutocast, type Checkpointing } from './checkpointing.ts';
import type { DType } from '../tensor/dtype.ts';
import { embedding } from '../ops/embedding.ts';
import { multiHeadSelfAttention } from '../ops/mha.ts';
import type { AttentionDevice } from '../ops/attention.ts';
import { adaptiveAvgPool2d, batchNorm2d, conv2d, maxPool2d, type ConvWorkspaceTable } from '../ops/conv.ts';
import type { Tensor } from '../tensor/tensor.ts';
import type { ParameterSpec, TrainableModel } from './model.ts';

export type { Checkpointing } from './checkpointing.ts';

interface Layer {
  /** In `Module._apply` order. */
  params: ParameterSpec[];
  /** Names in `named_parameters()` order, when it differs (a module with parameters of its own and children). */
  namedOrder?: string[];
  forward(rt: Runtime, x: Tensor): Tensor;
  /** Under activation checkpointing: the regions to checkpoint one after another (residual: itself; repeat: each body). */
  checkpointRegions?: ((rt: Runtime, x: Tensor) => Tensor)[];
}

/** Runs layers in order, dropping each intermediate as nn.Sequential does. */
function sequential(rt: Runtime, layers: readonly Layer[], x: Tensor): Tensor {
  let h = rt.cuda.ref(x);
  for (const layer of layers) {
    const out = layer.forward(rt, h);
    rt.cuda.release(h);
    h = out;
  }
  return h;
}

function buildLayer(spec: LayerSpec, path: string, dtype: DType, weights: Map<string, Tensor>, device: AttentionDevice, convWorkspaces: ConvWorkspaceTable | null): Layer {
  const w = (name: string) => weights.get(`${path}.${name}`)!;
  switch (spec.type) {
    case 'linear': {
      const bias = spec.bias ?? true;
      const params: ParameterSpec[] = [{ name: `${path}.weight`, shape: [spec.out_features, spec.in_features], dtype }];
      if (bias) params.push({ name: `${path}.bias`, shape: [spec.out_features], dtype });
      return { params, forward: (rt, x) => linear(rt, x, w('weight'), bias ? w('bias') : null, `${path} (linear)`) };
    }
    case 'relu':
    case 'gelu':
    case 'silu':
    case 'tanh':
    case 'sigmoid': {
      const kind = spec.type;
      return { params: [], forward: (rt, x) => activation(rt, kind, x, `${path} (${kind})`) };
    }
    case 'dropout':
      return { params: [], forward: (rt, x) => dropout(rt, x, spec.p, `${path} (dropout)`) };
    case 'layer_norm':
      return {
        params: [
          { name: `${path}.weight`, shape: [spec.normalized_shape], dtype },
          { name: `${path}.bias`, shape: [spec.normalized_shape], dtype },
        ],
        forward: (rt, x) => layerNorm(rt, x, w('weight'), w('bias'), `${path} (layer_norm)`),
      };
    case 'rms_norm':
      return {
        params: [{ name: `${path}.weight`, shape: [spec.normalized_shape], dtype }],
        forward: (rt, x) => rmsNorm(rt, x, w('weight'), `${path} (rms_norm)`),
      };
    case 'embedding':
      return {
        params: [{ name: `${path}.weight`, shape: [spec.num_embeddings, spec.embedding_dim], dtype }],
        forward: (rt, x) => embedding(rt, w('weight'), x, `${path} (embedding)`),
      };
    case 'self_attention': {
      const e = spec.embed_dim;
      const a = `${path}.attn`;
      // MultiheadAttention: its child out_proj moves first; named_parameters lists its own in_proj first
      const params: ParameterSpec[] = [
        { name: `${a}.out_proj.weight`, shape: [e, e], dtype },
        { name: `${a}.out_proj.bias`, shape: [e], dtype },
        { name: `${a}.in_proj_weight`, shape: [3 * e, e], dtype },
        { name: `${a}.in_proj_bias`, shape: [3 * e], dtype },
      ];
      const namedOrder = [2, 3, 0, 1].map((i) => params[i]!.name);
      return {
        params,
        namedOrder,
        forward: (rt, x) =>
          multiHeadSelfAttention(
            rt,
            x,
            { inProjWeight: weights.get(`${a}.in_proj_weight`)!, inProjBias: weights.get(`${a}.in_proj_bias`)!, outProjWeight: weights.get(`${a}.out_proj.weight`)!, outProjBias: weights.get(`${a}.out_proj.bias`)! },
            spec.num_heads,
            device,
            `${path} (self_attention)`,
          ),
      };
    }
    case 'flatten':
      // nn.Flatten(1): a view (FlattenBackward reshapes the gradient back)
      return { params: [], forward: (rt, x) => rt.autograd.view('ViewBackward0', x, [x.shape[0]!, x.numel / x.shape[0]!]) };
    case 'conv2d': {
      const bias = spec.bias ?? true;
      const conv = { inChannels: spec.in_channels, outChannels: spec.out_channels, kernel: spec.kernel_size, stride: spec.stride ?? 1, padding: spec.padding ?? 0 };
      const params: ParameterSpec[] = [{ name: `${path}.weight`, shape: [conv.outChannels, conv.inChannels, conv.kernel, conv.kernel], dtype }];
      if (bias) params.push({ name: `${path}.bias`, shape: [conv.outChannels], dtype });
      return { params, forward: (rt, x) => conv2d(rt, x, w('weight'), bias ? w('bias') : null, conv, convWorkspaces, `${path} (conv2d)`) };
    }
    case 'batch_norm2d': {
      const c = spec.num_features;
      return {
        params: [
          { name: `${path}.weight`, shape: [c], dtype },
          { name: `${path}.bias`, shape: [c], dtype },
          { name: `${path}.running_mean`, shape: [c], dtype, buffer: true },
          { name: `${path}.running_var`, shape: [c], dtype, buffer: true },
          { name: `${path}.num_batches_tracked`, shape: [], dtype: 'int64', buffer: true },
        ],
        forward: (rt, x) => batchNorm2d(rt, x, w('weight'), w('bias'), `${path} (batch_norm2d)`),
      };
    }
    case 'max_pool2d':
      return { params: [], forward: (rt, x) => maxPool2d(rt, x, { kernel: spec.kernel_size, stride: spec.stride ?? spec.kernel_size, padding: 0 }, `${path} (max_pool2d)`) };
    case 'adaptive_avg_pool2d':
      return { params: [], forward: (rt, x) => adaptiveAvgPool2d(rt, x, `${path} (adaptive_avg_pool2d)`) };
    case 'residual': {
      const body = spec.layers.map((s, i) => buildLayer(s, `${path}.body.${i}`, dtype, weights, device, convWorkspaces));
      const forward = (rt: Runtime, x: Tensor) => {
        const b = sequential(rt, body, x);
        const out = add(rt, x, b, `${path} (residual add)`);
        rt.cuda.release(b);
        return out;
      };
      return { params: body.flatMap((l) => l.params), namedOrder: namedOrder(body), forward, checkpointRegions: [forward] };
    }
    case 'repeat': {
      const bodies = Array.from({ length: spec.count }, (_, k) => spec.layers.map((s, i) => buildLayer(s, `${path}.bodies.${k}.${i}`, dtype, weights, device, convWorkspaces)));
      return {
        params: bodies.flat().flatMap((l) => l.params),
        namedOrder: namedOrder(bodies.flat()),
        forward: (rt, x) => {
          let h = rt.cuda.ref(x);
          for (const body of bodies) {
            const out = sequential(rt, body, h);
            rt.cuda.release(h);
            h = out;
          }
          return h;
        },
        checkpointRegions: bodies.map((body) => (rt: Runtime, x: Tensor) => sequential(rt, body, x)),
      };
    }
  }
}

const SIMULATED_LAYERS = new Set(['linear', 'conv2d', 'batch_norm2d', 'max_pool2d', 'adaptive_avg_pool2d', 'relu', 'gelu', 'silu', 'tanh', 'sigmoid', 'dropout', 'layer_norm', 'rms_norm', 'flatten', 'embedding', 'self_attention', 'residual', 'repeat']);

/** named_parameters order of layers in sequence. */
function namedOrder(layers: readonly Layer[]): string[] {
  return layers.flatMap((l) => l.namedOrder ?? l.params.map((p) => p.name));
}

/** Refuses, with the layer's path, a layer type the engine does not simulate yet. */
function checkSimulated(layers: readonly LayerSpec[], path: string): void {
  layers.forEach((l, i) => {
    const where = `${path}[${i}]`;
    if (!SIMULATED_LAYERS.has(l.type)) {
      throw new InputError(`${where}.type`, `the layer type "${l.type}" is not simulated yet; simulated: ${[...SIMULATED_LAYERS].join(', ')}`);
    }
    if (l.type === 'residual' || l.type === 'repeat') checkSimulated(l.layers, `${where}.layers`);
  });
}

/** The shape per sample each layer makes (checks that the layers line up, naming the layer that does not). */
function outputShape(layers: readonly LayerSpec[], input: readonly number[], path: string): number[] {
  let shape = [...input];
  layers.forEach((l, i) => {
    const where = `${path}[${i}]`;
    const fail = (problem: string): never => {
      throw new InputError(where, problem);
    };
    const last = shape[shape.length - 1]!;
    switch (l.type) {
      case 'linear':
        if (l.in_features !== last) fail(`a linear layer of ${l.in_features} input features gets ${last}`);
        shape = [...shape.slice(0, -1), l.out_features];
        break;
      case 'embedding':
        shape = [...shape, l.embedding_dim];
        break;
      case 'self_attention':
        if (shape.length !== 2) fail(`self_attention needs [sequence, features] per sample, gets [${shape.join(', ')}]`);
        if (l.embed_dim !== last) fail(`a self_attention layer of embed_dim ${l.embed_dim} gets ${last} features`);
        if (l.embed_dim % l.num_heads !== 0) fail(`embed_dim ${l.embed_dim} is not divisible by num_heads ${l.num_heads}`);
        break;
      case 'layer_norm':
      case 'rms_norm':
        if (l.normalized_shape !== last) fail(`a ${l.type} of ${l.normalized_shape} features gets ${last}`);
        break;
      case 'conv2d': {
        if (shape.length !== 3 || shape[0] !== l.in_channels) fail(`conv2d needs [${l.in_channels}, height, width] per sample, gets [${shape.join(', ')}]`);
        if (shape[1] !== shape[2]) fail('conv2d is simulated for square images (height = width)');
        const o = Math.floor((shape[1]! + 2 * (l.padding ?? 0) - l.kernel_size) / (l.stride ?? 1)) + 1;
        if (o < 1) fail('the image is smaller than the kernel');
        shape = [l.out_channels, o, o];
        break;
      }
      case 'batch_norm2d':
        if (shape.length !== 3 || shape[0] !== l.num_features) fail(`batch_norm2d of ${l.num_features} channels gets [${shape.join(', ')}]`);
        break;
      case 'max_pool2d': {
        if (shape.length !== 3) fail(`max_pool2d needs [channels, height, width], gets [${shape.join(', ')}]`);
        const o = Math.floor((shape[1]! - l.kernel_size) / (l.stride ?? l.kernel_size)) + 1;
        shape = [shape[0]!, o, o];
        break;
      }
      case 'adaptive_avg_pool2d':
        if (shape.length !== 3) fail(`adaptive_avg_pool2d needs [channels, height, width], gets [${shape.join(', ')}]`);
        if (l.output_size !== 1) fail('adaptive_avg_pool2d is simulated for output_size 1 (global average pooling)');
        shape = [shape[0]!, 1, 1];
        break;
      case 'flatten':
        shape = [shape.reduce((a, b) => a * b, 1)];
        break;
      case 'residual': {
        const out = outputShape(l.layers, shape, `${where}.layers`);
        if (out.join() !== shape.join()) fail(`a residual body must keep the shape [${shape.join(', ')}], it makes [${out.join(', ')}]`);
        break;
      }
      case 'repeat':
        for (let k = 0; k < l.count; k++) shape = outputShape(l.layers, shape, `${where}.layers`);
        break;
      default:
        break;
    }
  });
  return shape;
}

/**
 * The model's forward: `for layer in layers: x = layer(x)`; with checkpointing, each top-level residual and each
 * body of a top-level repeat runs as `x = checkpoint(region, x, use_reentrant=False)`.
 */
function layerListForward(rt: Runtime, layers: readonly Layer[], x: Tensor, checkpointing: Checkpointing): Tensor {
  const autocastDType = rt.autocast?.dtype ?? null;
  let h = rt.cuda.ref(x);
  for (const layer of layers) {
    const regions = checkpointing ? layer.checkpointRegions : undefined;
    if (!regions) {
      const out = layer.forward(rt, h);
      rt.cuda.release(h);
      h = out;
      continue;
    }
    for (const region of regions) {
      const out =
        checkpointing === 'reentrant'
          ? rt.autograd.checkpointReentrant(h, (input) => region(rt, input), (body) => rerunUnderAutocast(rt, autocastDType, body))
          : rt.autograd.checkpoint(h, (input) => region(rt, input), (body) => rerunUnderAutocast(rt, autocastDType, body));
      rt.cuda.release(h);
      h = out;
    }
  }
  return h;
}

/**
 * A layer list applied to `x` of shape [B, *inputShape] (the features last), trained with
 * `F.cross_entropy(out.reshape(-1, C), y.reshape(-1))`, `y` of shape [B, *inputShape[:-1]].
 */
export function layerListModel(
  layers: readonly LayerSpec[],
  inputShape: readonly number[],
  dtype: DType,
  checkpointing: Checkpointing = false,
  device: AttentionDevice = { computeCapability: [9, 0] },
  convWorkspaces: ConvWorkspaceTable | null = null,
): TrainableModel {
  checkSimulated(layers, 'model.layers');
  // A list that starts with an embedding takes token ids [B, *input_shape] and predicts a class per token.
  const tokenIds = layers[0]?.type === 'embedding';
  layers.forEach((l, i) => {
    if (l.type === 'embedding' && i > 0) throw new InputError(`model.layers[${i}].type`, 'an embedding layer can only come first (it takes token ids)');
  });
  const outShape = outputShape(layers, inputShape, 'model.layers'); // checks the shapes line up
  // F.cross_entropy(out.reshape(-1, C), y.reshape(-1)): a class per position of the output
  const labelShape = outShape.slice(0, -1);
  const weights = new Map<string, Tensor>();
  const built = layers.map((s, i) => buildLayer(s, `layers.${i}`, dtype, weights, device, convWorkspaces));
  const parameters = built.flatMap((l) => l.params);
  const order = namedOrder(built);
  return {
    parameters,
    optimizerOrder: order.some((n, i) => n !== parameters[i]!.name) ? order : undefined,
    tensors: weights,
    makeInputs(rt, batch) {
      const x = tokenIds ? rt.cuda.empty([batch, ...inputShape], 'int64', 'input ids x', 'input') : rt.cuda.empty([batch, ...inputShape], dtype, 'input x', 'input');
      const y = rt.cuda.empty([batch, ...labelShape], 'int64', 'labels y', 'input');
      return [x, y];
    },
    loss(rt, [x, y]) {
      const out = layerListForward(rt, built, x!, checkpointing);
      let logits = out;
      if (out.shape.length > 2) {
        const classes = out.shape[out.shape.length - 1]!;
        logits = rt.autograd.view('ViewBackward0', out, [out.numel / classes, classes]); // out.reshape(-1, C)
      }
      const loss = crossEntropy(rt, logits, y!);
      if (logits !== out) rt.cuda.release(logits);
      rt.cuda.release(out); // `out` is a local of the loss function: freed when it returns
      return loss;
    },
  };
}
