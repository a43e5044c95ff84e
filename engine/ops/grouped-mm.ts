/**
 * `torch.nn.functional.grouped_mm(input, weight, offs=offs)` (PyTorch 2.11 `_grouped_mm`, aten/src/ATen/native/cuda/
 * GroupedBlas.cpp) for a 2-D input [S, K] sorted by group and a 3-D weight [G, K, N]: one output [S, N]
 * (`create_grouped_gemm_output_tensor`: rows padded to 16 bytes, none for the sizes here).
 * - bf16 input and weight on Hopper or Blackwell (`_grouped_mm_allowed_device`) run CUTLASS's grouped GEMM
 *   (cuda/GroupMM.cu `bf16bf16_grouped_mm`): after the output, a buffer of the groups' arguments (a pointer each to
 *   A, B and C for the group count rounded up to 2, a problem shape of 3 int32 and 3 strides of 8 bytes per group)
 *   and the kernel's workspace, both freed when it returns. Measured on the H100 (test/fixtures/calibration/
 *   mixtral_4l_*): 480 B for 8 groups and 67,584 B of workspace (512 B per multiprocessor, 132 of them), whatever
 *   the tokens per group.
 * - Other dtypes (fp32 under AMP, fp16) take `_grouped_mm_fallback`: one `mm` per group into slices of the output,
 *   nothing else allocated (measured: mixtral_4l_amp_bf16_ckpt, fp32).
 * GroupedMmBackward0 (derivatives.yaml `_grouped_mm`) saves the input (for the weight's gradient), the weight (for
 * the input's) and offs (measured with frozen experts: lora_mixtral_4l_bf16_sgdm_s1024 frees the gathered input as
 * the grouped GEMM returns); its backward computes
 * the weight's gradient first (`mat2` sorts before `self`), [G, K, N] in the weight's memory order (the view's
 * TransposeBackward0 then hands AccumulateGrad a gradient in the parameter's own order, which it steals), then the
 * input's [S, K]; each is one grouped GEMM with the same temporaries.
 * Below sm80 transformers 5.17 does not call it (`_can_use_grouped_mm`): its custom op `grouped_mm_fallback`
 * allocates `torch.zeros` outputs instead, and in backward `zeros_like(input)` then `zeros_like(weight)`.
 */
import type { AttentionDevice } from './attention.ts';
import type { Tensor } from '../tensor/tensor.ts';
import type { Runtime } from './runtime.ts';

/** CUTLASS grouped GEMM workspace per multiprocessor (67,584 B on the H100's 132). */
const kGroupedGemmWorkspaceBytesPerSm = 512;

export type GroupedMmPath = 'cutlass' | 'aten_fallback' | 'transformers_fallback';

/** Which kernel `_grouped_mm` (or transformers' fallback) runs for this dtype on this device. */
export function groupedMmPath(dtype: Tensor['dtype'], device: AttentionDevice): GroupedMmPath {
  const [major] = device.computeCapability;
  if (major < 8) return 'transformers_fallback';
  if (dtype === 'bfloat16' && (major === 9 || major === 10) && device.vendor !== 'amd') return 'cutlass';
  return 'aten_fallback';
}

/** Bytes of the arguments buffer `bf16bf16_grouped_mm` allocates for `groups` groups. */
export function groupedGemmArgsBytes(groups: number): number {
  const aligned = Math.ceil(groups / 2) * 2; // 16-byte alignment of the pointer arrays
  return aligned * 3 * 8 + groups * 3 * 4 + groups * 3 * 8;
}

/** One grouped GEMM's output [rows, cols] and, on CUTLASS's path, its two temporaries. */
function groupedGemm(rt: Runtime, shape: readonly number[], dtype: Tensor['dtype'], groups: number, path: GroupedMmPath, label: string): Tensor {
  const { cuda } = rt;
  const out = cuda.empty(shape, dtype, label, 'activation');
  if (path === 'cutlass') {
    const args = cuda.empty([groupedGemmArgsBytes(groups)], 'uint8', `${label}: grouped GEMM arguments`, 'workspace');
    const workspace = cuda.empty([kGroupedGemmWorkspaceBytesPerSm * cuda.multiProcessorCount], 'uint8', `${label}: CUTLASS workspace`, 'workspace');
    cuda.release(workspace);
    cuda.release(args);
  }
  return out;
}

/**
 * `grouped_mm(input [S, K], weight [G, K, N] (a transposed view of the parameter), offs)` -> [S, N]. `weight` is
 * the view; its base the 3-D parameter.
 */
export function groupedMm(rt: Runtime, input: Tensor, weight: Tensor, offs: Tensor, device: AttentionDevice, label: string): Tensor {
  const { cuda, autograd } = rt;
  const [groups, k, n] = weight.shape as [number, number, number];
  const rows = input.shape[0]!;
  const path = groupedMmPath(input.dtype, device);
  const inputNeeds = autograd.needsGrad([input]);
  const weightNeeds = autograd.needsGrad([weight]);
  // As for mm, each input is saved only for the other's gradient (VariableType saves a variable when an output
  // whose formula reads it needs computing): a frozen weight (LoRA) leaves the input unsaved; offs serves both.
  const toSave: Tensor[] = [];
  if (weightNeeds) toSave.push(input); // self, for mat2's gradient
  if (inputNeeds) toSave.push(weight); // mat2, for self's gradient
  if (inputNeeds || weightNeeds) toSave.push(offs);
  const saved = autograd.saveInputs(inputNeeds || weightNeeds, toSave);
  // transformers' fallback makes its output with torch.zeros: one allocation, as at::empty
  const out = groupedGemm(rt, [rows, n], input.dtype, groups, path, label);
  autograd.record(path === 'transformers_fallback' ? 'GroupedMmFallbackBackward' : 'GroupedMmBackward0', [input, weight], [out], saved, ([grad]) => {
    if (!grad) return [null, null];
    if (path === 'transformers_fallback') {
      // `grad_input = torch.zeros_like(input); grad_weight = torch.zeros_like(weight)`, then an mm per group into each
      const gInput = cuda.empty(input.shape, input.dtype, `grad of ${label} input`);
      const gWeight = cuda.empty(weight.shape, weight.dtype, `grad of ${label} weight`);
      return [inputNeeds ? gInput : (cuda.release(gInput), null), weightNeeds ? gWeight : (cuda.release(gWeight), null)];
    }
    const gWeight = weightNeeds ? groupedGemm(rt, [groups, k, n], grad.dtype, groups, path, `grad of ${label} weight`) : null;
    const gInput = inputNeeds ? groupedGemm(rt, [rows, k], grad.dtype, groups, path, `grad of ${label} input`) : null;
    return [gInput, gWeight];
  });
  return out;
}
