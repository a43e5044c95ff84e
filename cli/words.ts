/**
 * The engine's ids in English words: advice, the reasons a change is not advised, notes, recommendations. The
 * renderer has its own strings (en, zh-CN) keyed by the same ids (engine/result/advice.ts lists them and their
 * parameters); this is the CLI's.
 */
import { LORA_MODEL_TYPES, formatSize, loraConfigCode, type AdviceItem, type AdviceOf, type NotApplicable, type Note, type Recommendation } from '../engine/index.ts';

/**
 * A whole number with commas between groups of three digits ("1,557,611,200"), as `toLocaleString('en-US')`
 * writes it, without loading ICU's locale data (the first `toLocaleString` costs a CLI process about 11 ms).
 */
export function groupDigits(n: number): string {
  return String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

function accumulation(a: AdviceOf<'accumulation'>, goal: 'memory' | 'batch'): string {
  const base = `micro-batch ${a.micro_batch} with ${a.steps} accumulation steps`;
  if (goal === 'batch') return `${base}: effective batch ${a.effective_batch} (now ${a.plan_effective_batch})`;
  return a.effective_batch === a.plan_effective_batch
    ? `${base} (the same effective batch of ${a.effective_batch})`
    : `${base} (effective batch ${a.effective_batch}; the plan's is ${a.plan_effective_batch})`;
}

/** What to change, in words. */
export function adviceChange(a: AdviceItem, goal: 'memory' | 'batch' = 'memory'): string {
  switch (a.id) {
    case 'amp_bf16':
      return 'train with autocast bf16 (precision "amp_bf16")';
    case 'bf16_weights':
      return `${a.lora ? 'load the frozen base' : 'load the weights'} in bf16 and train without autocast (${a.hugging_face ? 'from_pretrained(..., dtype=torch.bfloat16)' : 'model.to(torch.bfloat16)'}; precision "bf16")`;
    case 'checkpointing':
      return 'turn on activation checkpointing (non-reentrant)';
    case 'fused_optimizer':
      return `use the fused ${a.optimizer} (fused=True)`;
    case 'accumulation':
      return accumulation(a, goal);
    case 'expandable_segments':
      return `set PYTORCH_CUDA_ALLOC_CONF=${a.alloc_conf}`;
    case 'sdpa':
      return 'use scaled_dot_product_attention (attention "sdpa")';
    case 'lora':
      return `fine-tune LoRA adapters instead of the whole model: ${loraConfigCode(a)}, PEFT's defaults (where PEFT has none: q_proj and v_proj; for phi3, its fused qkv_proj) (training.lora in the plan)`;
  }
}

const COSTS: Record<AdviceItem['id'], string> = {
  amp_bf16: 'needs a GPU with bf16 (Ampere or newer); numerics change slightly, fp32 weights are kept',
  bf16_weights: 'no fp32 copy of the weights: updates too small for bf16 to represent are rounded away, which can slow or stall training; the optimizer state is bf16 too',
  checkpointing: 'recomputes each checkpointed block in backward: about a third more compute per step',
  fused_optimizer: 'none in memory terms; needs parameters on a CUDA device in a floating-point dtype',
  accumulation: 'each optimizer step takes more, smaller forward/backward passes: slower when the GPU was not saturated',
  expandable_segments: 'none in compute; segments grow by mapping pages, which is slower the first time memory is reserved',
  sdpa: 'none: faster, and attention no longer keeps the [L, L] probabilities for backward',
  lora: 'a different fine-tune: only the adapters learn (the base frozen), which can change the quality reached; a larger r or more target modules cost more memory',
};

/** What a change costs, in words (a larger effective batch by accumulation keeps the passes' size: there are more of them). */
export function adviceCost(a: AdviceItem, goal: 'memory' | 'batch' = 'memory'): string {
  if (a.id === 'accumulation' && goal === 'batch') return 'each optimizer step runs more forward/backward passes of the same size: steps take proportionally longer';
  if (a.id === 'bf16_weights' && a.lora) return 'the frozen base computes in bf16 without autocast; the adapters, their gradients and optimizer state stay fp32 (PEFT upcasts them)';
  return COSTS[a.id];
}

const CHANGE_NAMES: Record<AdviceItem['id'], string> = {
  amp_bf16: 'autocast bf16',
  bf16_weights: 'bf16 weights',
  checkpointing: 'activation checkpointing',
  fused_optimizer: 'a fused optimizer',
  accumulation: 'gradient accumulation',
  expandable_segments: 'expandable segments',
  sdpa: 'scaled_dot_product_attention',
  lora: 'LoRA',
};

/** Why a change is not advised, in words: `checkpointing: saves nothing (simulated)`. */
export function notApplicableText(n: NotApplicable): string {
  const name = CHANGE_NAMES[n.id];
  switch (n.reason_id) {
    case 'already_set':
      return `${name}: the plan already ${n.id === 'amp_bf16' ? 'trains in reduced precision' : n.id === 'bf16_weights' ? 'keeps its weights in 16 bits (bf16 or fp16)' : n.id === 'lora' ? 'trains part of the model (LoRA or frozen parameters)' : 'uses it'}`;
    case 'no_optimizer_state':
      return `${name}: plain SGD keeps no optimizer state`;
    case 'batch_of_one':
      return `${name}: the micro-batch is 1 and cannot be split`;
    case 'saves_nothing':
      return `${name}: saves nothing (simulated)`;
    case 'uses_more_memory':
      return `${name}: uses ${formatSize(-(n.saved_bytes ?? 0))} more (simulated)`;
    case 'no_larger_batch':
      return `${name}: does not fit a larger effective batch (searched)`;
    case 'plan_fits':
      return `${name}: the plan fits as it is (LoRA changes what is trained, so it is advised only for a full fine-tune that does not fit)`;
    case 'not_simulated':
      return `${name}: not simulated for this model yet${n.message ? ` (${n.message})` : ''}`;
    case 'fails_in_pytorch':
      return `${name}: PyTorch fails the step it makes${n.message ? ` (${n.message})` : ''}`;
    case 'no_default_targets':
      return `${name}: advised only for the models with default target modules (PEFT's; where it has none, q_proj and v_proj; for phi3, its fused qkv_proj): ${LORA_MODEL_TYPES.join(', ')}`;
    case 'needs_amp_bf16':
      return `${name}: advised only for plans that train with autocast bf16 (precision "amp_bf16"); from fp32, autocast bf16 comes first`;
    case 'gpu_without_bf16':
      return `${name}: this GPU has no bf16 arithmetic (compute capability below 8.0, as the V100 and T4): PyTorch would emulate it, far slower`;
  }
}

/** A note, in words. */
export function noteText(note: Note): string {
  switch (note.id) {
    case 'parameters_loaded_in_training_dtype':
      return 'Parameters are created in their training dtype and moved to the GPU one by one in module order, as from_pretrained(..., dtype=...) followed by .to("cuda") does. Building a model in fp32 on the GPU and casting it afterwards leaves freed blocks cached and reserves more.';
    case 'stopped_at_oom':
      return `The simulation stopped at PyTorch's out-of-memory error in step ${note.step} (${note.phase}): the peaks are those reached before it; the model's size is its own.`;
    case 'custom_gpu_from_cap':
      return `The memory cap (${formatSize(note.memory_limit_bytes)}) is larger than ${note.base_gpu} holds: simulated as a custom GPU of that size with ${note.base_gpu}'s other figures.`;
    case 'not_steady':
      return `The caching allocator's state did not repeat within the ${note.steps} steps simulated (${
        note.reason === 'max_steps' ? 'the most memplan runs' : note.reason === 'work_limit' ? 'as many as the work limit allows' : "with garbage_collection_threshold its blocks' ages never repeat"
      }), so later steps are not proven to fit: the peaks are those of these steps.`;
    case 'lora_targets_unmatched':
      return `No module of this model is named ${note.targets.map((t) => `"${t}"`).join(' or ')}, so LoRA adapts only the other target modules (PEFT says nothing while one name matches): check the names against model.named_modules().`;
    case 'lora_modules_to_save_unmatched':
      return `No module's name ends with ${note.modules.map((t) => `"${t}"`).join(' or ')}, so modules_to_save copies nothing for ${note.modules.length === 1 ? 'it' : 'them'} and ${note.modules.length === 1 ? 'that module stays' : 'those modules stay'} frozen (PEFT says nothing): check the names against model.named_modules().`;
    case 'needs_more_than_simulated':
      return `It runs out of memory even with no cap on a GPU of ${formatSize(note.bytes)}, the most memplan simulates: it needs more than that.`;
    case 'checkpoint_inputs_no_grad':
      return `With reentrant checkpointing, the input of ${note.blocks} checkpointed block${note.blocks === 1 ? '' : 's'} needs no gradient (it comes from a frozen embedding, or from the data, and nothing calls model.enable_input_require_grads()): PyTorch warns "None of the inputs have requires_grad=True" and computes no gradient inside ${note.blocks === 1 ? 'it' : 'them'}, so ${note.blocks === 1 ? 'its' : 'their'} parameters are not trained, as simulated here. Call model.enable_input_require_grads(), or use non-reentrant checkpointing, to train them.`;
  }
}

const percent = (x: number) => `${Math.round(x * 100)}%`;

/** The recommended batch and why, in words. */
/** A fitting region above a failing batch (max-batch's `unstable_region`). */
export function unstableRegionText(region: { from_batch: number; to_batch: number; failing_batches: number[] }): string {
  return `Fit is not monotonic here: ${region.failing_batches.join(', ')} ran out of memory while larger batches up to ${region.to_batch} fit (batches ${region.from_batch}-${region.to_batch}); the recommendation stays below ${region.from_batch}, with its neighbours fitting.`;
}

/** What a plan that does not fit needs (max-batch's `needed`). */
export function neededText(needed: { peak_reserved_bytes: number | null; more_than_bytes: number | null; fits_on: { id: string }[] }, size: (n: number) => string): string {
  const where = needed.fits_on.length ? `it fits on ${needed.fits_on.map((g) => g.id).join(', ')}` : 'it fits on no GPU of the catalog';
  if (needed.peak_reserved_bytes === null) return `Batch 1 runs out of memory even with no cap on a GPU of ${size(needed.more_than_bytes ?? 0)}, the most memplan simulates: it needs more than that, and ${where}.`;
  return (
    `Batch 1 reserves ${size(needed.peak_reserved_bytes)} here with no cap (less under a cap: PyTorch frees its cache and retries). ` +
    `Simulated on each GPU of the catalog, whose attention kernels and workspaces differ, ${where}.`
  );
}

export function recommendationText(r: Recommendation, cap: number): string {
  // --multiple-of: the batch is one (rounded down), or no multiple qualifies (one below the multiple itself)
  const rounded = r.multiple_of <= 1 ? '' : r.batch % r.multiple_of === 0 ? `, rounded down to a multiple of ${r.multiple_of}` : `; no multiple of ${r.multiple_of} qualifies`;
  switch (r.reason_id) {
    case 'nothing_fits':
      return 'Recommended: none (even a batch of 1 runs out of memory).';
    case 'keeps_margin':
      return `Recommended: ${r.batch} (keeps ${percent(r.safety_margin)} of the cap free for what the plan does not describe${rounded}; it leaves ${formatSize(r.headroom_bytes)})`;
    case 'margin_not_kept':
      return (
        `Recommended: ${r.batch}, the largest that fits${rounded}; it leaves ${formatSize(Math.max(0, r.headroom_bytes))} of the ${formatSize(cap)} cap free, ` +
        `less than the ${percent(r.safety_margin)} margin (${formatSize(r.margin_bytes)}) kept for other processes, NCCL and cuDNN's choices: ` +
        'a smaller batch leaves more room; a larger GPU or one of the changes below keeps the margin.'
      );
  }
}

/**
 * Lines as the terminal shows them: one line each, no two blank lines in a row. `previous` is the line printed
 * before them: '' drops a leading blank line (`simulate` passes it at the start of its output), undefined keeps it
 * (`max-batch`'s). A command prints its answer as soon as it has it and the rest (the advice) later, and the parts
 * read as one text.
 */
export function joinLines(lines: readonly string[], previous: string | undefined): string {
  const kept = lines.filter((l, i) => !(l === '' && (i === 0 ? previous === '' : lines[i - 1] === '')));
  return kept.length ? kept.join('\n') + '\n' : '';
}
