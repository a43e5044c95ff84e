/**
 * torchvision 0.26 classifiers as `torchvision.models.<name>(num_classes=N).to(dtype)`, trained with
 * `F.cross_entropy(model(x), y)` on x [B, 3, S, S] (the parameters' dtype) and y [B] int64. With activation
 * checkpointing, every block of layer1..layer4 (ResNet) or every encoder layer (ViT) runs under
 * `torch.utils.checkpoint.checkpoint` (memplan's measurement script does the same).
 *
 * ResNet (resnet.py): conv1 7x7/2, bn1, relu, maxpool 3x3/2, four stages of BasicBlock (18, 34) or Bottleneck
 * (50, 101, 152; stride on the 3x3), adaptive average pool, fc. Parameters and buffers in `Module._apply` order:
 * per BatchNorm weight, bias, then running_mean, running_var (in the model's dtype) and num_batches_tracked
 * (int64).
 */
import { InputError } from '../errors.ts';
import type { AttentionDevice } from '../ops/attention.ts';
import { adaptiveAvgPool2d, addInPlace, batchNorm2d, conv2d, maxPool2d, reluInPlace, type Conv2dSpec, type ConvWorkspaceTable } from '../ops/conv.ts';
import { linear } from '../ops/linear.ts';
import { crossEntropy } from '../ops/loss.ts';
import type { Runtime } from '../ops/runtime.ts';
import type { DType } from '../tensor/dtype.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { runBlocks, type Checkpointing } from './checkpointing.ts';
import type { ParameterSpec, TrainableModel } from './model.ts';
import { visionTransformer } from './vit.ts';

export interface VisionOptions {
  dtype: DType;
  imageSize: number;
  numClasses: number;
  checkpointing: Checkpointing;
  convWorkspaces: ConvWorkspaceTable | null;
  device: AttentionDevice;
}

const RESNETS: Record<string, { bottleneck: boolean; layers: [number, number, number, number] }> = {
  resnet18: { bottleneck: false, layers: [2, 2, 2, 2] },
  resnet34: { bottleneck: false, layers: [3, 4, 6, 3] },
  resnet50: { bottleneck: true, layers: [3, 4, 6, 3] },
  resnet101: { bottleneck: true, layers: [3, 4, 23, 3] },
  resnet152: { bottleneck: true, layers: [3, 8, 36, 3] },
};

export function torchvisionModel(name: string, options: VisionOptions): TrainableModel {
  if (name.startsWith('vit_')) return visionTransformer(name, options);
  const arch = RESNETS[name];
  if (!arch) throw new InputError('model.torchvision', `"${name}" is not simulated yet`);
  return resnet(arch.bottleneck, arch.layers, options);
}

interface Block {
  path: string;
  convs: { name: string; spec: Conv2dSpec }[];
  downsample: Conv2dSpec | null;
}

function resnet(bottleneck: boolean, layers: readonly number[], options: VisionOptions): TrainableModel {
  const { dtype, checkpointing } = options;
  const expansion = bottleneck ? 4 : 1;
  const params: ParameterSpec[] = [];
  const conv = (name: string, spec: Conv2dSpec) => params.push({ name: `${name}.weight`, shape: [spec.outChannels, spec.inChannels, spec.kernel, spec.kernel], dtype });
  const bn = (name: string, c: number) => {
    params.push({ name: `${name}.weight`, shape: [c], dtype }, { name: `${name}.bias`, shape: [c], dtype });
    params.push({ name: `${name}.running_mean`, shape: [c], dtype, buffer: true }, { name: `${name}.running_var`, shape: [c], dtype, buffer: true });
    params.push({ name: `${name}.num_batches_tracked`, shape: [], dtype: 'int64', buffer: true });
  };
  const stem: Conv2dSpec = { inChannels: 3, outChannels: 64, kernel: 7, stride: 2, padding: 3 };
  conv('conv1', stem);
  bn('bn1', 64);
  const blocks: Block[] = [];
  let inplanes = 64;
  layers.forEach((count, stage) => {
    const planes = 64 * 2 ** stage;
    for (let i = 0; i < count; i++) {
      const stride = stage > 0 && i === 0 ? 2 : 1;
      const path = `layer${stage + 1}.${i}`;
      const width = planes;
      const convs = bottleneck
        ? [
            { name: 'conv1', spec: { inChannels: inplanes, outChannels: width, kernel: 1, stride: 1, padding: 0 } },
            { name: 'conv2', spec: { inChannels: width, outChannels: width, kernel: 3, stride, padding: 1 } },
            { name: 'conv3', spec: { inChannels: width, outChannels: planes * expansion, kernel: 1, stride: 1, padding: 0 } },
          ]
        : [
            { name: 'conv1', spec: { inChannels: inplanes, outChannels: planes, kernel: 3, stride, padding: 1 } },
            { name: 'conv2', spec: { inChannels: planes, outChannels: planes, kernel: 3, stride: 1, padding: 1 } },
          ];
      const downsample = stride !== 1 || inplanes !== planes * expansion ? { inChannels: inplanes, outChannels: planes * expansion, kernel: 1, stride, padding: 0 } : null;
      // registration order: conv1, bn1, conv2, bn2, (conv3, bn3,) relu, downsample
      convs.forEach((c, k) => {
        conv(`${path}.${c.name}`, c.spec);
        bn(`${path}.bn${k + 1}`, c.spec.outChannels);
      });
      if (downsample) {
        conv(`${path}.downsample.0`, downsample);
        bn(`${path}.downsample.1`, downsample.outChannels);
      }
      blocks.push({ path, convs, downsample });
      inplanes = planes * expansion;
    }
  });
  params.push({ name: 'fc.weight', shape: [options.numClasses, 512 * expansion], dtype }, { name: 'fc.bias', shape: [options.numClasses], dtype });
  const weights = new Map<string, Tensor>();
  const w = (name: string) => weights.get(name)!;
  const table = options.convWorkspaces;

  function convBn(rt: Runtime, x: Tensor, convName: string, bnName: string, spec: Conv2dSpec): Tensor {
    const c = conv2d(rt, x, w(`${convName}.weight`), null, spec, table, convName);
    const out = batchNorm2d(rt, c, w(`${bnName}.weight`), w(`${bnName}.bias`), bnName);
    rt.cuda.release(c); // `out = self.bn(out)` rebinds
    return out;
  }

  function block(rt: Runtime, x: Tensor, b: Block): Tensor {
    const { cuda } = rt;
    let out = cuda.ref(x);
    b.convs.forEach((c, k) => {
      // `out = self.conv2(out)` rebinds `out` before `self.bn2` runs: the conv's input dies there (it matters
      // where the conv saves nothing: in a checkpointed block, measured in test/fixtures/boundary-suite)
      const convName = `${b.path}.${c.name}`;
      const conv = conv2d(rt, out, w(`${convName}.weight`), null, c.spec, table, convName);
      cuda.release(out);
      const bnName = `${b.path}.bn${k + 1}`;
      out = batchNorm2d(rt, conv, w(`${bnName}.weight`), w(`${bnName}.bias`), bnName);
      cuda.release(conv);
      if (k < b.convs.length - 1) {
        const r = reluInPlace(rt, out, `${b.path}.relu`);
        cuda.release(out);
        out = r;
      }
    });
    const identity = b.downsample ? convBn(rt, x, `${b.path}.downsample.0`, `${b.path}.downsample.1`, b.downsample) : cuda.ref(x);
    const summed = addInPlace(rt, out, identity);
    cuda.release(out);
    const result = reluInPlace(rt, summed, `${b.path}.relu`);
    cuda.release(summed);
    cuda.release(identity); // the block returns: `identity` dies
    return result;
  }

  return {
    parameters: params,
    tensors: weights,
    makeInputs(rt, batch) {
      const x = rt.cuda.empty([batch, 3, options.imageSize, options.imageSize], dtype, 'images x', 'input');
      const y = rt.cuda.empty([batch], 'int64', 'labels y', 'input');
      return [x, y];
    },
    loss(rt, [x, y]) {
      const { cuda, autograd } = rt;
      let h = convBn(rt, x!, 'conv1', 'bn1', stem);
      let next = reluInPlace(rt, h, 'relu');
      cuda.release(h);
      h = maxPool2d(rt, next, { kernel: 3, stride: 2, padding: 1 }, 'maxpool');
      cuda.release(next);
      h = runBlocks(rt, h, blocks.length, checkpointing, (input, i) => block(rt, input, blocks[i]!));
      const pooled = adaptiveAvgPool2d(rt, h, 'avgpool');
      cuda.release(h);
      const flat = autograd.view('ViewBackward0', pooled, [pooled.shape[0]!, pooled.shape[1]!]);
      cuda.release(pooled);
      const logits = linear(rt, flat, w('fc.weight'), w('fc.bias'), 'fc');
      cuda.release(flat);
      const loss = crossEntropy(rt, logits, y!);
      cuda.release(logits);
      return loss;
    },
  };
}
