/**
 * Activation checkpointing as the models apply it: a sequence of blocks (decoder layers, ResNet blocks, ViT encoder
 * layers) where each block runs as `torch.utils.checkpoint.checkpoint(block, x, use_reentrant=...)`.
 * Both kinds rerun the block in backward under the autocast state of its forward (`recompute_fn` and
 * CheckpointFunction save it), a region of its own whose weight-cast cache starts empty.
 */
import { Autocast, type AutocastDType } from '../ops/autocast.ts';
import type { Runtime } from '../ops/runtime.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { BlockPasses, type BlockReuse } from './block-reuse.ts';

export type Checkpointing = false | 'non_reentrant' | 'reentrant';

export function rerunUnderAutocast(rt: Runtime, dtype: AutocastDType | null, body: () => Tensor): Tensor {
  if (!dtype) return body();
  const outer = rt.autocast;
  const region = new Autocast(dtype);
  rt.autocast = region;
  rt.cuda.unwindingFrames++; // its exit frees the region's casts, on an exception too
  try {
    return body();
  } finally {
    region.exit(rt);
    rt.autocast = outer;
    rt.cuda.unwindingFrames--;
  }
}

/**
 * `for block in blocks: x = block(x)`, each block checkpointed when asked. `closure`: the tensors a call gets
 * besides x (a decoder layer's mask, rotary cos/sin, position ids, passed through `partial`), the same for every
 * block or chosen per block (Gemma's layers each get their own kind's mask and rotary pair), which the
 * non-reentrant frame keeps until it dies (measured on the H100: lora_gemma2_2b_bf16_eager_ckpt_s1024 frees the
 * global layers' mask after layer 1's backward, the sliding layers' after layer 0's). The reentrant
 * CheckpointFunction keeps keyword arguments in its ctx until the graph dies: the model holds them
 * (`ReentrantClosures`). `positional`: those of them the model passes positionally (GPT-2's mask), which the
 * reentrant CheckpointFunction saves with x and releases as its backward ends (Autograd.checkpointReentrant).
 */
export function runBlocks(
  rt: Runtime,
  x: Tensor,
  count: number,
  checkpointing: Checkpointing,
  block: (x: Tensor, i: number) => Tensor,
  closure: readonly (Tensor | null)[] | ((i: number) => readonly (Tensor | null)[]) = [],
  reuse?: BlockReuse,
  positional: readonly Tensor[] = [],
): Tensor {
  const heldBy = (i: number) => (typeof closure === 'function' ? closure(i) : closure).filter((t): t is Tensor => t !== null);
  const autocastDType = rt.autocast?.dtype ?? null;
  const rerun = (body: () => Tensor) => rerunUnderAutocast(rt, autocastDType, body);
  // Note [Reused blocks]: of the blocks of one kind, all but two at each end replay a recording of another's requests
  const pass = BlockPasses.of(rt, count, reuse);
  let h = x;
  for (let i = 0; i < count; i++) {
    const run = (input: Tensor) => block(input, i);
    const input = h;
    const call = () => (!checkpointing ? run(input) : checkpointing === 'reentrant' ? rt.autograd.checkpointReentrant(input, run, rerun, positional) : rt.autograd.checkpoint(input, run, rerun, heldBy(i)));
    const out = !pass ? call() : pass.replays(i) ? pass.replayForward(i, h, [h, ...heldBy(i)]) : pass.runForward(i, h, [h, ...heldBy(i)], call);
    rt.cuda.release(h);
    h = out;
  }
  return h;
}

/**
 * What reentrant checkpointing's CheckpointFunction keeps past the forward: its ctx holds `run_function`, the
 * decoder layer's `partial` with its keyword arguments (the mask, the rotary cos and sin, position ids), for as long
 * as the graph lives, until the loss that holds it is rebound by the next micro-step's forward (utils/checkpoint.py
 * `ctx.run_function = run_function`; measured on the H100: lora_tinyllama_4l_bf16_ckpt_reentrant). A model holds a
 * forward's closure here and lets the previous graph's go in its `releaseGraph`.
 */
export class ReentrantClosures {
  /** The closure of the graph the current loss holds. */
  private held: Tensor[] = [];
  /** The closure of the forward that just ran: its graph is the new loss's. */
  private fresh: Tensor[] = [];

  static of(checkpointing: Checkpointing): ReentrantClosures | null {
    return checkpointing === 'reentrant' ? new ReentrantClosures() : null;
  }

  hold(rt: Runtime, closure: readonly (Tensor | null)[]): void {
    for (const t of closure) if (t) this.fresh.push(rt.cuda.ref(t));
  }

  /** The previous loss was rebound: its graph, the CheckpointFunction nodes and their closures, go. */
  releaseGraph(rt: Runtime): void {
    for (const t of this.held) rt.cuda.release(t);
    this.held = this.fresh;
    this.fresh = [];
  }
}
