/**
 * What an answer of `simulate` or `max-batch` assumes, and how sure memplan is of it: ids with parameters under
 * `caveats` in --json (the schema below), a few words in the text. The grounds are the repository's evidence:
 * the H100 SXM is where the calibration runs and the boundary suite were recorded (test/fixtures/calibration,
 * test/fixtures/boundary-suite) and the library workspaces were measured (resources/cudnn-workspaces-h100.json.gz,
 * test/engine/ops/attention.test.ts); every other GPU's figures carry the catalog's evidence (resources/gpus.json);
 * docs/engine.md's known gaps name the settings whose numbers are known to differ.
 */
import { z } from 'zod';
import type { DeviceSpec, GpuSpec, Plan } from '../engine/index.ts';
import { gpuCatalog } from './gpus.ts';

const caveatSchema = z.discriminatedUnion('id', [
  /** Parameters created in their training dtype on the CPU, then moved with .to("cuda") (docs/plan-format.md). */
  z.object({ id: z.literal('parameters_loaded_in_training_dtype') }),
  /** forward, loss / accumulation steps, backward; optimizer.step(); zero_grad(set_to_none=True). */
  z.object({ id: z.literal('standard_step'), grad_accumulation_steps: z.number().int() }),
  /** Nothing cached by earlier work in the process (a search in one process can differ by a batch or two). */
  z.object({ id: z.literal('fresh_process') }),
  /** Steps simulated until the peak reserved stops rising (optimizer state exists from step 1). */
  z.object({ id: z.literal('steady_state') }),
  /** The GPU the calibration runs were recorded on. */
  z.object({ id: z.literal('calibrated_gpu'), gpu: z.string() }),
  /** Library workspaces (cuBLAS, cuDNN convolution and attention) are the H100's measurements. */
  z.object({ id: z.literal('workspaces_from_h100'), gpu: z.string() }),
  /** The catalog's figures for this GPU that were not measured on it. */
  z.object({ id: z.literal('gpu_figures_not_measured'), gpu: z.string(), total_memory: z.string(), non_pytorch: z.string() }),
  /** A custom GPU described by a cap larger than the default GPU: the H100's other figures. */
  z.object({ id: z.literal('custom_gpu') }),
  /** amp_fp16: every step updates; a real run whose first steps overflow can fit a little more. */
  z.object({ id: z.literal('grad_scaler_steps_update') }),
  /** A known gap of docs/engine.md for this plan. */
  z.object({ id: z.literal('known_gap'), gap: z.enum(['vit_reentrant_checkpointing']) }),
]);

export const caveatsSchema = z.object({
  /** high: the calibrated GPU and no known gap; medium: figures carried over from it; low: not measured at all (ROCm). */
  confidence: z.enum(['high', 'medium', 'low']),
  items: z.array(caveatSchema),
});

export type Caveat = z.output<typeof caveatSchema>;
export type Caveats = z.output<typeof caveatsSchema>;

/** The GPU the calibration runs, the boundary suite and the workspace tables were recorded on. */
const CALIBRATED_GPU = 'h100-sxm';

function catalogEntry(device: DeviceSpec): GpuSpec | undefined {
  return gpuCatalog().gpus.find((g) => g.id === device.id);
}

/** What a simulation of `plan` on `device` assumes, and how sure memplan is. */
export function caveatsFor(plan: Plan, device: DeviceSpec): Caveats {
  const items: Caveat[] = [
    { id: 'parameters_loaded_in_training_dtype' },
    { id: 'standard_step', grad_accumulation_steps: plan.training.grad_accumulation_steps },
    { id: 'fresh_process' },
    { id: 'steady_state' },
  ];
  let confidence: Caveats['confidence'] = 'high';
  const lower = (to: Caveats['confidence']) => {
    const order = ['high', 'medium', 'low'];
    if (order.indexOf(to) > order.indexOf(confidence)) confidence = to;
  };
  const gpu = catalogEntry(device);
  if (device.id === 'custom') {
    items.push({ id: 'custom_gpu' });
    lower('medium');
  } else if (gpu?.id === CALIBRATED_GPU) {
    items.push({ id: 'calibrated_gpu', gpu: gpu.id });
  } else if (gpu) {
    items.push({ id: 'workspaces_from_h100', gpu: gpu.id });
    if (gpu.total_memory_source.kind !== 'measured' || gpu.non_pytorch_source.kind !== 'measured') {
      items.push({ id: 'gpu_figures_not_measured', gpu: gpu.id, total_memory: gpu.total_memory_source.kind, non_pytorch: gpu.non_pytorch_source.kind });
    }
    lower(gpu.vendor === 'amd' ? 'low' : 'medium');
  }
  if (plan.training.precision === 'amp_fp16' && plan.training.grad_scaler_skipped_steps === 0) items.push({ id: 'grad_scaler_steps_update' });
  const model = plan.model;
  const vit = ('torchvision' in model && model.torchvision.startsWith('vit')) || ('preset' in model && model.preset.startsWith('vit'));
  if (vit && plan.training.activation_checkpointing === 'reentrant') {
    items.push({ id: 'known_gap', gap: 'vit_reentrant_checkpointing' });
    lower('medium');
  }
  return { confidence, items };
}

/** The caveats in words: one line of assumptions, one of confidence and its grounds. */
export function caveatsText(c: Caveats): string[] {
  const accumulation = c.items.find((i) => i.id === 'standard_step');
  const steps = accumulation?.id === 'standard_step' && accumulation.grad_accumulation_steps > 1 ? `${accumulation.grad_accumulation_steps} micro-steps of ` : '';
  const assumes =
    'Assumes: weights loaded as from_pretrained(..., dtype=...) then .to("cuda"); the standard step ' +
    `(${steps}forward, loss, backward, optimizer.step(), zero_grad(set_to_none=True)); a fresh process; the steady state.`;
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
      case 'known_gap':
        grounds.push('reentrant checkpointing of ViT reserves about 5% less than measured (docs/engine.md)');
        break;
      default:
        break;
    }
  }
  return [assumes, `Confidence: ${c.confidence}${grounds.length ? `: ${grounds.join('; ')}` : ''}.`];
}
