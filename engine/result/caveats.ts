/**
 * What an answer of `simulate` or `max-batch` assumes, and how sure memplan is of it: ids with parameters, carried
 * by the results (`caveats`) so that the CLI (cli/caveats.ts words them in English) and the app (renderer/src/
 * results/Caveats.svelte, in every locale) say the same thing. Pure: computed from the plan and the GPU simulated.
 *
 * The grounds are the repository's evidence: the H100 SXM is where the calibration runs and the boundary suite
 * were recorded (test/fixtures/calibration, test/fixtures/boundary-suite) and the library workspaces were measured
 * (resources/cudnn-workspaces-h100.json.gz, test/engine/ops/attention.test.ts); every other GPU's figures carry
 * the catalog's evidence (resources/gpus.json `total_memory_source`, `non_pytorch_source`); docs/engine.md's known
 * gaps name the settings whose numbers are known to differ.
 */
import { z } from 'zod';
import { hasBf16Arithmetic, type Evidence, type GpuSpec } from '../gpu/catalog.ts';
import { hfConfigOf, type Plan } from '../plan/schema.ts';
import { resolveHfConfig } from '../models/hf/config.ts';
import { PRESETS } from '../models/presets.ts';

/** How a figure of the catalog is known (engine/gpu/catalog.ts `evidenceSchema`), or `unknown`: a GPU not from the catalog. */
const evidenceKind = z.enum(['measured', 'derived', 'unconfirmed', 'unknown']);

export const caveatSchema = z.discriminatedUnion('id', [
  /**
   * Parameters created in their training dtype on the CPU, then moved with .to("cuda") one by one in module order
   * (docs/plan-format.md), as the plan's model is built: a Hugging Face model loaded with from_pretrained(...,
   * dtype=...), a torchvision model or a layer list built by its constructor and cast (`built_by`; results saved
   * before it was said read as from_pretrained, what memplan said then).
   */
  z.object({ id: z.literal('parameters_loaded_in_training_dtype'), built_by: z.enum(['from_pretrained', 'torchvision', 'layers']).default('from_pretrained') }),
  /** forward, loss / accumulation steps, backward; optimizer.step(); zero_grad(set_to_none=True). */
  z.object({ id: z.literal('standard_step'), grad_accumulation_steps: z.number().int().positive() }),
  /** Nothing cached by earlier work in the process (a search in one process can differ by a batch or two). */
  z.object({ id: z.literal('fresh_process') }),
  /** Steps simulated until the allocator's state repeats (optimizer state exists from step 1). */
  z.object({ id: z.literal('steady_state') }),
  /** The GPU the calibration runs were recorded on. */
  z.object({ id: z.literal('calibrated_gpu'), gpu: z.string() }),
  /** Library workspaces (cuBLAS, cuDNN convolution and attention) are the H100's measurements. */
  z.object({ id: z.literal('workspaces_from_h100'), gpu: z.string() }),
  /** The catalog's figures for this GPU that were not measured on it. */
  z.object({ id: z.literal('gpu_figures_not_measured'), gpu: z.string(), total_memory: evidenceKind, non_pytorch: evidenceKind }),
  /** A custom GPU described by a cap larger than the default GPU: the H100's other figures. */
  z.object({ id: z.literal('custom_gpu') }),
  /** amp_fp16: every step updates; a real run whose first steps overflow can fit a little more. */
  z.object({ id: z.literal('grad_scaler_steps_update') }),
  /**
   * A model family implemented from transformers' source and checked against small calibration runs and real
   * largest-batch searches, none at a published size (docs/engine.md, known gaps): Mixtral and Qwen3-MoE now;
   * gemma2 and gemma3_text appear in results saved before Gemma 2 2B and Gemma 3 1B were measured, which stay
   * readable.
   */
  z.object({ id: z.literal('family_not_measured'), family: z.enum(['gemma2', 'gemma3_text', 'mixtral', 'qwen3_moe']) }),
  /**
   * A sparse mixture of experts (Mixtral, Qwen3-MoE): which experts each token goes to depends on the data and the router, so
   * memplan cannot know it. transformers 5.17 runs the experts with `grouped_mm` by default, whose every allocation
   * is sized by tokens x top_k, whatever the routing: balanced routing and the worst case (every token to the same
   * top_k experts) need the same memory (models/hf/mixtral-moe.ts, Note [Routing]; recorded runs with a random
   * router's unbalanced routing match allocation for allocation). The per-expert loop of
   * `experts_implementation="eager"`, whose memory would depend on it, is not simulated.
   */
  z.object({ id: z.literal('moe_routing'), experts: z.number().int().positive(), top_k: z.number().int().positive(), experts_implementation: z.literal('grouped_mm') }),
  /** A known gap of docs/engine.md for this plan. */
  z.object({ id: z.literal('known_gap'), gap: z.enum(['vit_reentrant_checkpointing']) }),
  /**
   * A convolution's cuDNN workspaces at this batch were not measured (the H100's table has every batch to 512 and
   * a few windows past it): interpolated or extrapolated, while cuDNN's heuristics switch algorithms with the
   * batch; near a whole GPU's limit the answer can be a few batches high (ResNet-50 AMP bf16 on the H100: 1864
   * with interpolated workspaces, 1861 real and measured).
   */
  z.object({ id: z.literal('conv_workspaces_estimated'), batch: z.number().int().positive() }),
  /**
   * bf16 (or AMP bf16) on an NVIDIA GPU below compute capability 8.0 (V100, T4), which has no bf16 arithmetic:
   * PyTorch emulates it (`torch.cuda.is_bf16_supported(including_emulation=True)`), far slower, and its attention
   * runs the math backend (no bf16 flash or memory-efficient kernel there: sdp_utils.cpp), which holds the scores.
   */
  z.object({ id: z.literal('bf16_emulated'), gpu: z.string() }),
]);

export const CONFIDENCE_LEVELS = ['high', 'medium', 'low'] as const;

export const caveatsSchema = z.object({
  /** high: the calibrated GPU and no known gap; medium: figures carried over from it, or a model family not recorded; low: not measured at all (ROCm). */
  confidence: z.enum(CONFIDENCE_LEVELS),
  items: z.array(caveatSchema),
});

export type Caveat = z.output<typeof caveatSchema>;
/** How a plan's model is built before `.to("cuda")` (caveat parameters_loaded_in_training_dtype). */
export type ModelBuild = Extract<Caveat, { id: 'parameters_loaded_in_training_dtype' }>['built_by'];
export type CaveatId = Caveat['id'];
export type Caveats = z.output<typeof caveatsSchema>;
export type Confidence = Caveats['confidence'];

/** The GPU the calibration runs, the boundary suite and the workspace tables were recorded on. */
export const CALIBRATED_GPU = 'h100-sxm';

/**
 * The GPU as caveatsFor needs it: a catalog entry (an engine `Device`) carries its evidence; a device built by
 * hand (tests, benches) has none, and its figures count as not measured.
 */
export type CaveatDevice = Pick<GpuSpec, 'name' | 'vendor'> & { id?: string; total_memory_source?: Evidence; non_pytorch_source?: Evidence; compute_capability?: readonly [number, number] };

/** What the simulation itself found: a convolution whose workspaces the table has not measured (ops/conv.ts). */
export interface SimulationFindings {
  convWorkspacesEstimated: boolean;
}

/** How the plan's model is built before `.to("cuda")`: as a user of its kind builds it. */
function builtBy(plan: Plan): ModelBuild {
  const m = plan.model;
  if ('layers' in m) return 'layers';
  if ('torchvision' in m || ('preset' in m && PRESETS[m.preset]?.kind === 'torchvision')) return 'torchvision';
  return 'from_pretrained';
}

/** What a simulation of `plan` on `device` assumes, and how sure memplan is. */
export function caveatsFor(plan: Plan, device: CaveatDevice, found?: SimulationFindings): Caveats {
  const items: Caveat[] = [
    { id: 'parameters_loaded_in_training_dtype', built_by: builtBy(plan) },
    { id: 'standard_step', grad_accumulation_steps: plan.training.grad_accumulation_steps },
    { id: 'fresh_process' },
    { id: 'steady_state' },
  ];
  let confidence: Confidence = 'high';
  const lower = (to: Confidence) => {
    if (CONFIDENCE_LEVELS.indexOf(to) > CONFIDENCE_LEVELS.indexOf(confidence)) confidence = to;
  };
  if (device.id === 'custom') {
    items.push({ id: 'custom_gpu' });
    lower('medium');
  } else if (device.id === CALIBRATED_GPU) {
    items.push({ id: 'calibrated_gpu', gpu: device.id });
  } else {
    const gpu = device.id ?? device.name;
    items.push({ id: 'workspaces_from_h100', gpu });
    const total = device.total_memory_source?.kind ?? 'unknown';
    const outside = device.non_pytorch_source?.kind ?? 'unknown';
    if (total !== 'measured' || outside !== 'measured') items.push({ id: 'gpu_figures_not_measured', gpu, total_memory: total, non_pytorch: outside });
    // ROCm: no run of memplan's was ever recorded on an AMD GPU.
    lower(device.vendor === 'amd' ? 'low' : 'medium');
  }
  if (plan.training.precision === 'amp_fp16' && plan.training.grad_scaler_skipped_steps === 0) items.push({ id: 'grad_scaler_steps_update' });
  const bf16 = plan.training.precision === 'bf16' || plan.training.precision === 'amp_bf16';
  if (bf16 && !hasBf16Arithmetic(device)) {
    items.push({ id: 'bf16_emulated', gpu: device.id ?? device.name });
    lower('medium');
  }
  const model = plan.model;
  const vit = ('torchvision' in model && model.torchvision.startsWith('vit')) || ('preset' in model && model.preset.startsWith('vit'));
  if (vit && plan.training.activation_checkpointing === 'reentrant') {
    items.push({ id: 'known_gap', gap: 'vit_reentrant_checkpointing' });
    lower('medium');
  }
  const hfConfig = hfConfigOf(model);
  const modelType = hfConfig?.['model_type'];
  if (modelType === 'mixtral' || modelType === 'qwen3_moe') {
    items.push({ id: 'family_not_measured', family: modelType });
    lower('medium');
  }
  if (found?.convWorkspacesEstimated) {
    items.push({ id: 'conv_workspaces_estimated', batch: plan.training.batch_size });
    lower('medium');
  }
  if (modelType === 'mixtral' || modelType === 'qwen3_moe') {
    const cfg = resolveHfConfig(hfConfig!);
    if (cfg.family === 'llama' && cfg.moe) items.push({ id: 'moe_routing', experts: cfg.moe.experts, top_k: cfg.moe.topK, experts_implementation: 'grouped_mm' });
  }
  return { confidence, items };
}
