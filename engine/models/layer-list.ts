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
import { Autocast, type AutocastDType } from '../ops/autocast.ts';
import type { DType } from '../tensor/dtype.ts';
import type { Tensor } from '../tensor/tensor.ts';
import type { ParameterSpec, TrainableModel } from './model.ts';

export type Checkpointing = false | 'non_reentrant' | 'reentrant';

/**
 * CheckpointFunction saves the autocast state of its forward (`device_autocast_kwargs`) and reruns the region
 * under it in backward, as an autocast region of its own (its weight-cast cache starts empty).
 */
export function rerunUnderAutocast(rt: Runtime, dtype: AutocastDType | null, body: () => Tensor): Tensor {
  if (!dtype) return body();
  const outer = rt.autocast;
  const region = new Autocast(dtype);
  rt.autocast = region;
  try {
    return body();
  } finally {
    region.exit(rt);
    rt.autocast = outer;
  }
}

interface Layer {
  params: ParameterSpec[];
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

function buildLayer(spec: LayerSpec, path: string, dtype: DType, weights: Map<string, Tensor>): Layer {
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
    case 'flatten':
      return { params: [], forward: (rt, x) => rt.cuda.view(x, [x.shape[0]!, x.numel / x.shape[0]!]) };
    case 'residual': {
      const body = spec.layers.map((s, i) => buildLayer(s, `${path}.body.${i}`, dtype, weights));
      const forward = (rt: Runtime, x: Tensor) => {
        const b = sequential(rt, body, x);
        const out = add(rt, x, b, `${path} (residual add)`);
        rt.cuda.release(b);
        return out;
      };
      return { params: body.flatMap((l) => l.params), forward, checkpointRegions: [forward] };
    }
    case 'repeat': {
      const bodies = Array.from({ length: spec.count }, (_, k) => spec.layers.map((s, i) => buildLayer(s, `${path}.bodies.${k}.${i}`, dtype, weights)));
      return {
        params: bodies.flat().flatMap((l) => l.params),
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
    default:
      throw new InputError(`model.layers (${path})`, `the layer type "${spec.type}" is not simulated yet; supported: linear, relu, gelu, silu, tanh, sigmoid, dropout, layer_norm, rms_norm, flatten, residual, repeat`);
  }
}

const SIMULATED_LAYERS = new Set(['linear', 'relu', 'gelu', 'silu', 'tanh', 'sigmoid', 'dropout', 'layer_norm', 'rms_norm', 'flatten', 'residual', 'repeat']);

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

/** Output shape per sample of a layer list (features only). */
function outputFeatures(layers: readonly LayerSpec[], features: number): number {
  let f = features;
  for (const l of layers) {
    if (l.type === 'linear') {
      if (l.in_features !== f) throw new InputError('model.layers', `a linear layer expects ${l.in_features} input features but gets ${f}`);
      f = l.out_features;
    } else if (l.type === 'residual') {
      if (outputFeatures(l.layers, f) !== f) throw new InputError('model.layers', 'a residual body must keep the number of features');
    } else if (l.type === 'repeat') {
      for (let i = 0; i < l.count; i++) f = outputFeatures(l.layers, f);
    } else if ((l.type === 'layer_norm' || l.type === 'rms_norm') && l.normalized_shape !== f) {
      throw new InputError('model.layers', `a ${l.type} of ${l.normalized_shape} features gets ${f}`);
    }
  }
  return f;
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
export function layerListModel(layers: readonly LayerSpec[], inputShape: readonly number[], dtype: DType, checkpointing: Checkpointing = false): TrainableModel {
  checkSimulated(layers, 'model.layers');
  const inputFeatures = inputShape[inputShape.length - 1]!;
  outputFeatures(layers, inputFeatures); // checks the shapes line up
  const weights = new Map<string, Tensor>();
  const built = layers.map((s, i) => buildLayer(s, `layers.${i}`, dtype, weights));
  return {
    description: `layer list of ${built.reduce((n, l) => n + l.params.length, 0)} parameter tensors`,
    parameters: built.flatMap((l) => l.params),
    bindParameter(name, tensor) {
      weights.set(name, tensor);
    },
    makeInputs(rt, batch) {
      const x = rt.cuda.empty([batch, ...inputShape], dtype, 'input x', 'input');
      const y = rt.cuda.empty([batch, ...inputShape.slice(0, -1)], 'int64', 'labels y', 'input');
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
