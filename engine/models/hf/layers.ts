/**
 * The decoder/encoder layer loop: `for layer in layers: hidden = layer(hidden, ...)`. Under gradient
 * checkpointing (`GradientCheckpointingLayer`, transformers 5.x modeling_layers.py) each layer's `__call__` runs
 * as `torch.utils.checkpoint.checkpoint(partial(layer.__call__, **kwargs), hidden, ...)` with the plan's
 * use_reentrant (Hugging Face's default is False); only the hidden state is a tensor input, the other tensors
 * (mask, rotary cos/sin, position ids) are in the call's arguments and `partial`, which the non-reentrant frame
 * keeps until it dies. (The reentrant CheckpointFunction keeps them in its ctx: not measured, modelled the same.)
 */
import type { Runtime } from '../../ops/runtime.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { rerunUnderAutocast, type Checkpointing } from '../layer-list.ts';

export function runLayers(
  rt: Runtime,
  x: Tensor,
  count: number,
  checkpointing: Checkpointing,
  layer: (x: Tensor, i: number) => Tensor,
  /** The tensors each layer call gets besides the hidden state (mask, cos/sin, position ids). */
  closure: readonly (Tensor | null)[] = [],
): Tensor {
  const held = closure.filter((t): t is Tensor => t !== null);
  const autocastDType = rt.autocast?.dtype ?? null;
  const rerun = (body: () => Tensor) => rerunUnderAutocast(rt, autocastDType, body);
  let h = x;
  for (let i = 0; i < count; i++) {
    const run = (input: Tensor) => layer(input, i);
    const out = !checkpointing ? run(h) : checkpointing === 'reentrant' ? rt.autograd.checkpointReentrant(h, run, rerun) : rt.autograd.checkpoint(h, run, rerun, held);
    rt.cuda.release(h);
    h = out;
  }
  return h;
}
