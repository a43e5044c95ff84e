/**
 * The caveats of an answer (engine/result/caveats.ts: ids with parameters, carried by every simulate and
 * max-batch result) in English: one line of assumptions, one of confidence and its grounds.
 */
import type { Caveats, ModelBuild } from '../engine/index.ts';
import { groupDigits } from './words.ts';

/** How the weights reach the GPU, as the plan's kind of model is built (caveat parameters_loaded_in_training_dtype). */
const WEIGHTS: Record<ModelBuild, string> = {
  from_pretrained: 'weights loaded as from_pretrained(..., dtype=...) then .to("cuda")',
  torchvision: 'the model built by torchvision.models on the CPU, in its training dtype, then .to("cuda")',
  layers: 'the layers built on the CPU as nn.Modules, in their training dtype, then .to("cuda")',
};

/** The caveats in words: one line of assumptions, one of confidence and its grounds. */
export function caveatsText(c: Caveats): string[] {
  const accumulation = c.items.find((i) => i.id === 'standard_step');
  const steps = accumulation?.id === 'standard_step' && accumulation.grad_accumulation_steps > 1 ? `${accumulation.grad_accumulation_steps} micro-steps of ` : '';
  const loaded = c.items.find((i) => i.id === 'parameters_loaded_in_training_dtype');
  const built = loaded?.id === 'parameters_loaded_in_training_dtype' ? loaded.built_by : 'from_pretrained';
  const assumes =
    `Assumes: ${WEIGHTS[built]}; the standard step ` +
    `(${steps}forward, loss, backward, optimizer.step(), zero_grad(set_to_none=True)); a fresh process; the steady state.`;
  const moe = c.items.find((i) => i.id === 'moe_routing');
  const routing =
    moe?.id === 'moe_routing'
      ? `Mixture of experts (${moe.experts} experts, ${moe.top_k} per token): transformers runs them with ${moe.experts_implementation}, whose memory does not depend on which experts the tokens go to: balanced routing and the worst case (every token to the same ${moe.top_k} experts) need the same memory.`
      : null;
  const grounds: string[] = [];
  for (const i of c.items) {
    switch (i.id) {
      case 'calibrated_gpu':
        grounds.push(`${i.gpu} is the GPU memplan's calibration runs were recorded on`);
        break;
      case 'workspaces_from_h100':
        grounds.push(`the cuBLAS and cuDNN workspaces are the H100's, not measured on ${i.gpu}`);
        break;
      case 'gpu_figures_not_measured':
        grounds.push(`${i.gpu}'s memory figure is ${i.total_memory}, its CUDA context ${i.non_pytorch} (memplan gpus)`);
        break;
      case 'custom_gpu':
        grounds.push('a custom GPU: the H100\'s figures with the cap as its memory');
        break;
      case 'grad_scaler_steps_update':
        grounds.push('amp_fp16: every step is assumed to update (a run whose first steps overflow fits slightly more)');
        break;
      case 'family_not_measured':
        if (i.family === 'qwen3_moe') {
          grounds.push("Qwen3-MoE is simulated from transformers' source, checked against small recorded runs (4 layers, hidden 1024, 16 experts, in every precision: both peaks to the byte) and three real largest-batch searches, two of them on Qwen3-30B-A3B's layers cut to 4 and 8, not yet at a published size");
          break;
        }
        grounds.push("Mixtral is simulated from transformers' source, checked against small recorded runs (4 layers, hidden 1024: peak allocated within 0.03%, reserved within 3% built from its config and 5.2% loaded with from_pretrained, where the host's memory moves the driver's segments) and one real largest-batch search, not yet at a published size");
        break;
      case 'known_gap':
        grounds.push("reentrant checkpointing of ViT: every allocation matches PyTorch's, but in two of three recorded runs the driver placed segments among the host's memory mappings and PyTorch reserved up to 2.9% more (docs/engine.md)");
        break;
      case 'bf16_emulated':
        grounds.push(`${i.gpu} has no bf16 arithmetic (compute capability below 8.0): PyTorch emulates bf16, far slower, and runs attention on its math backend, which holds the attention scores (simulated so); fp16 with AMP's GradScaler is what it runs natively`);
        break;
      case 'conv_workspaces_estimated':
        grounds.push(
          `cuDNN's convolution workspaces at batch ${groupDigits(i.batch)} were not measured (the H100's table has every batch to 512 and a few windows past it): interpolated, while cuDNN switches algorithms with the batch, so near a whole GPU's limit the answer can be a few batches high (ResNet-50 AMP bf16 on the H100: 1,864 interpolated, 1,861 real)`,
        );
        break;
      default:
        break;
    }
  }
  return [assumes, ...(routing ? [routing] : []), `Confidence: ${c.confidence}${grounds.length ? `: ${grounds.join('; ')}` : ''}.`];
}
