/**
 * Convolutional-network ops on CUDA (cuDNN), as memory sees them. Measured on the H100 (torchvision ResNet-18/50
 * and ViT-B/16 calibration runs):
 * - conv2d: under autocast the weight, then the input, are cast (bias first when there is one); the output, then
 *   cuDNN's forward workspace for the call. ConvolutionBackward0 saves input and weight; backward allocates the
 *   input's gradient, the backward-data workspace, the weight's gradient, the backward-weight workspace (the bias's
 *   gradient, when there is a bias, is the output gradient summed).
 * - cuDNN picks its algorithm (and so its workspace) by heuristics: the sizes come from a table measured per
 *   convolution, batch and dtype (resources/cudnn-workspaces-h100.json, resources/measure/probe_workspaces.py).
 *   Between measured batches they are interpolated; for a convolution the table lacks, the pattern most measured
 *   algorithms follow is used (channels-last copies of input, output and, for k > 1, weight, plus 147 B).
 * - batch_norm (cudnn_batch_norm, training): the output in the input's dtype, then save_mean and save_invstd
 *   ([C], fp32); running statistics updated in place. Backward: grad input, then grad weight and grad bias.
 * - relu(inplace=True) and `out += identity`: no memory. max_pool2d: output, then int64 indices (saved).
 *   adaptive_avg_pool2d: the output only.
 */
import { DTYPE_BYTES, type DType } from '../tensor/dtype.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { OutOfMemoryError } from '../allocator/caching-allocator.ts';
import { castLower } from './autocast.ts';
import type { Runtime } from './runtime.ts';

export interface Conv2dSpec {
  inChannels: number;
  outChannels: number;
  kernel: number;
  stride: number;
  padding: number;
}

/** What cuDNN tries when a pass's usual workspace does not fit (measured): each plan's workspace, in order. */
export interface PlanFallback {
  /** The workspace requests of the plans that failed when only the output fitted, the usual one first. */
  failed: number[];
  /** The workspaces of the plan that then ran. */
  final: number[];
}

export interface ConvWorkspaces {
  /** The table has this convolution at this batch (false: interpolated, extrapolated, or the common pattern). */
  measured: boolean;
  forward: number[];
  backwardData: number[];
  backwardWeight: number[];
  /** Per pass, the plans tried when the usual workspace does not fit (null: not measured). */
  fallbacks?: [PlanFallback | null, PlanFallback | null, PlanFallback | null];
}

/** Workspace sizes by convolution and batch (the edges load resources/cudnn-workspaces-*.json into it). */
export interface ConvWorkspaceTable {
  lookup(spec: Conv2dSpec, size: number, dtype: DType, batch: number): ConvWorkspaces | null;
}

type FallbackRow = [[number[], number[]] | null, [number[], number[]] | null, [number[], number[]] | null];
type Rows = Record<string, [number[], number[] | null, number[]]>;

/**
 * resources/cudnn-workspaces-*.json.gz, version 2: each convolution's rows by batch are kept as JSON text, parsed the
 * first time the convolution is looked up. A plan reads a few dozen of the table's hundreds of convolutions; parsing
 * the file is then a scan of its strings (about 25 ms for the H100's 12 MB) instead of building every row (120 ms).
 */
interface WorkspaceFile {
  convs: Record<string, string>;
  fallbacks?: Record<string, string>;
}

function convKey(spec: Conv2dSpec, size: number, dtype: DType): string {
  return `${spec.inChannels}x${spec.outChannels}k${spec.kernel}s${spec.stride}p${spec.padding}@${size}:${dtype}`;
}

const total = (xs: readonly number[] | null | undefined) => (xs ?? []).reduce((a, b) => a + b, 0);

/**
 * The measured table. A batch between two measured ones gets each pass's total workspace interpolated linearly
 * (most algorithms' workspaces are copies of the activations, linear in the batch); beyond the last, extrapolated
 * from the last two.
 */
export function convWorkspaceTable(file: WorkspaceFile): ConvWorkspaceTable {
  const parsed = new Map<string, { rows: Rows; fallbacks: Record<string, FallbackRow> | undefined }>();
  const rowsOf = (key: string) => {
    let entry = parsed.get(key);
    if (!entry) {
      const text = file.convs[key];
      if (text === undefined) return null;
      const fallbacks = file.fallbacks?.[key];
      entry = { rows: JSON.parse(text) as Rows, fallbacks: fallbacks === undefined ? undefined : (JSON.parse(fallbacks) as Record<string, FallbackRow>) };
      parsed.set(key, entry);
    }
    return entry;
  };
  return {
    lookup(spec, size, dtype, batch) {
      const key = convKey(spec, size, dtype);
      const entry = rowsOf(key);
      if (!entry) return null;
      const rows = entry.rows;
      const fallbacks = fallbacksAt(entry.fallbacks, batch);
      const exact = rows[String(batch)];
      if (exact) return { measured: true, forward: exact[0], backwardData: exact[1] ?? [], backwardWeight: exact[2], fallbacks };
      const batches = Object.keys(rows).map(Number).sort((a, b) => a - b);
      let lo = batches[0]!;
      let hi = batches[batches.length - 1]!;
      if (batch < lo) hi = lo;
      else if (batch > hi) lo = batches[batches.length - 2] ?? hi;
      else {
        for (const b of batches) {
          if (b < batch) lo = b;
          if (b > batch) {
            hi = b;
            break;
          }
        }
      }
      const at = (pass: 0 | 1 | 2) => {
        const a = total(rows[String(lo)]![pass]);
        const b = total(rows[String(hi)]![pass]);
        if (hi === lo) return Math.round((a * batch) / lo);
        return Math.max(0, Math.round(a + ((b - a) * (batch - lo)) / (hi - lo)));
      };
      const one = (n: number) => (n > 0 ? [n] : []);
      return { measured: false, forward: one(at(0)), backwardData: one(at(1)), backwardWeight: one(at(2)), fallbacks };
    },
  };
}

/**
 * The fallback plans at a batch: those measured at that batch, else at the nearest measured batch above (the
 * largest below when none is), the failed plans' sizes scaled by the ratio of batches (they are activation-sized).
 * Past the last measured batch, the final plan's workspaces are extrapolated from the last two measured batches
 * instead: many final plans need a workspace that does not grow with the batch (ResNet-18's 512x512 3x3
 * convolution's weight pass: 18,432 B at every measured batch, and at 371 on the H100), others grow linearly.
 */
function fallbacksAt(rows: Record<string, FallbackRow> | undefined, batch: number): ConvWorkspaces['fallbacks'] {
  if (!rows) return undefined;
  const batches = Object.keys(rows).map(Number).sort((a, b) => a - b);
  const at = batches.find((b) => b >= batch) ?? batches[batches.length - 1]!;
  const scale = batch / at;
  const row = rows[String(at)]!;
  const scaled = (xs: number[]) => xs.map((n) => Math.max(1, Math.round(n * scale)));
  const previous = batch > at && batches.length > 1 ? batches[batches.length - 2]! : null;
  const final = (pass: number, xs: number[]) => {
    const before = previous === null ? null : rows[String(previous)]![pass]?.[1];
    if (!before || before.length !== xs.length) return scaled(xs);
    return xs.map((n, i) => Math.max(1, Math.round(n + ((n - before[i]!) * (batch - at)) / (at - previous!))));
  };
  return row.map((f, pass) => (f ? { failed: scaled(f[0]), final: final(pass, f[1]) } : null)) as ConvWorkspaces['fallbacks'];
}

function outputSize(size: number, spec: { kernel: number; stride: number; padding: number }): number {
  return Math.floor((size + 2 * spec.padding - spec.kernel) / spec.stride) + 1;
}

/** The measured algorithms' common pattern: channels-last copies of input, output and (k > 1) weight, plus 147 B. */
function fallbackWorkspaces(spec: Conv2dSpec, x: Tensor, outNumel: number, dtype: DType): ConvWorkspaces {
  const e = DTYPE_BYTES[dtype];
  const bytes = x.numel * e + outNumel * e + (spec.kernel > 1 ? spec.outChannels * spec.inChannels * spec.kernel * spec.kernel * e : 0) + 147;
  return { measured: false, forward: [bytes], backwardData: [bytes], backwardWeight: [bytes] };
}

/**
 * One cuDNN call's workspace (aten/src/ATen/native/cudnn/Conv_v8.cpp `run_single_conv`): the plan cached for
 * this convolution if one ran before, else the heuristics' plans in order (`try_plans`); a plan whose workspace
 * cannot be allocated raises OutOfMemoryError, PyTorch empties the cache and tries the next; the plan that runs
 * is cached for the process. Measured on the H100 (resources/measure/probe_conv_plans.py): under a tight cap
 * the plans tried are those of the table's `fallbacks`, ending with one that needs (almost) no workspace.
 */
function runConvPlan(rt: Runtime, key: string, usual: readonly number[], fallback: PlanFallback | null, label: string): void {
  const { cuda } = rt;
  cuda.convPlanRuns++;
  const run = (sizes: readonly number[]) => {
    const held: Tensor[] = [];
    try {
      for (const n of sizes) held.push(cuda.empty([n], 'uint8', label, 'workspace'));
    } finally {
      for (let i = held.length - 1; i >= 0; i--) cuda.release(held[i]);
    }
  };
  const cached = cuda.convPlans.get(key);
  if (cached) {
    try {
      run(cached);
      return;
    } catch (error) {
      if (!(error instanceof OutOfMemoryError)) throw error;
      cuda.allocator.emptyCache();
    }
  }
  const plans: (readonly number[])[] = [usual, ...(fallback ? [...fallback.failed.slice(1).map((n) => [n]), fallback.final] : [])];
  let last: unknown;
  for (const sizes of plans) {
    try {
      run(sizes);
      cuda.convPlans.set(key, sizes);
      return;
    } catch (error) {
      if (!(error instanceof OutOfMemoryError)) throw error;
      cuda.allocator.emptyCache();
      last = error;
    }
  }
  throw last;
}

/**
 * `F.conv2d(x, weight, bias, stride, padding)` with x [B, C, H, W] (square images). `gradContiguous: false` when
 * the output is only used through a permuted view (ViT's patches): backward first makes the gradient contiguous.
 */
export function conv2d(rt: Runtime, x: Tensor, weight: Tensor, bias: Tensor | null, spec: Conv2dSpec, table: ConvWorkspaceTable | null, label: string, gradContiguous = true): Tensor {
  const { cuda, autograd } = rt;
  const [xc, wc, bc] = rt.autocast ? castLower(rt, [x, weight, bias], [`${label} input`, `${label} weight`, `${label} bias`]) : [cuda.ref(x), cuda.ref(weight), bias ? cuda.ref(bias) : null];
  const [b, , size] = x.shape as [number, number, number, number];
  const o = outputSize(size, spec);
  const dtype = xc!.dtype;
  const outShape = [b, spec.outChannels, o, o];
  const ws = table?.lookup(spec, size, dtype, b) ?? fallbackWorkspaces(spec, x, outShape.reduce((p, d) => p * d, 1), dtype);
  if (!ws.measured) cuda.convWorkspacesEstimated = true;
  const xNeeds = autograd.needsGrad([xc ?? null]);
  const saved = autograd.saveInputs(autograd.needsGrad([xc ?? null, wc ?? null, bc ?? null]), [xc!, wc!]);
  const out = cuda.empty(outShape, dtype, label, 'activation');
  const plan = (pass: 0 | 1 | 2, usual: readonly number[], what: string) =>
    runConvPlan(rt, `${convKey(spec, size, dtype)}#${b}#${pass}`, usual, ws.fallbacks?.[pass] ?? null, `${label} cuDNN ${what} workspace`);
  plan(0, ws.forward, 'forward');
  autograd.record('ConvolutionBackward0', [xc ?? null, wc ?? null, bc ?? null], [out], saved, ([grad]) => {
    if (!grad) return [null, null, null];
    const gradCopy = gradContiguous ? null : cuda.empty(grad.shape, grad.dtype, `${label} backward: grad.contiguous()`, 'temporary');
    let gx: Tensor | null = null;
    if (xNeeds) {
      gx = cuda.empty(xc!.shape, grad.dtype, `grad of ${label} input`);
      plan(1, ws.backwardData, 'backward-data');
    }
    const gw = cuda.empty(wc!.shape, grad.dtype, `grad of ${label} weight`);
    plan(2, ws.backwardWeight, 'backward-weight');
    cuda.release(gradCopy);
    // the bias's gradient last: the output gradient summed over batch and pixels
    const gb = bc ? cuda.sumTo(grad, [spec.outChannels], `grad of ${label} bias`, false) : null;
    return [gx, gw, gb];
  });
  for (const t of [xc, wc, bc]) cuda.release(t);
  return out;
}

/**
 * `std::numeric_limits<int32_t>::max()`: cuDNN's batch norm takes fewer elements (aten/src/ATen/native/
 * Normalization.cpp `_batch_norm_impl_index`, else PyTorch's native CUDA batch norm: Note [Batch norm past 2^31
 * elements]), and 32-bit indexing at most this many elements and bytes of offset.
 */
const kInt32Max = 2 ** 31 - 1;

/** Bytes of the accumulator of PyTorch's Welford reduction (`WelfordData<float, int>`: mean, m2, n, nf). */
const kWelfordAccumulateBytes = 16;

/**
 * `F.batch_norm(x, running_mean, running_var, weight, bias, training=True)`: through cuDNN (the output in the input's
 * dtype, then save_mean and save_invstd [C] fp32; backward: grad input, weight, bias), or PyTorch's native kernels
 * for an input past cuDNN's size.
 */
export function batchNorm2d(rt: Runtime, x: Tensor, weight: Tensor, bias: Tensor, label: string): Tensor {
  if (x.numel >= kInt32Max) return nativeBatchNorm2d(rt, x, weight, bias, label);
  const { cuda, autograd } = rt;
  const c = x.shape[1]!;
  const needs = autograd.needsGrad([x, weight, bias]);
  const savedInput = autograd.saveInputs(needs, [x]);
  const out = cuda.empty(x.shape, x.dtype, label, 'activation');
  const mean = cuda.empty([c], 'float32', `${label} save_mean`, 'activation');
  const invstd = cuda.empty([c], 'float32', `${label} save_invstd`, 'activation');
  const saved = needs ? [...savedInput, cuda.ref(mean), cuda.ref(invstd)] : [];
  cuda.release(mean);
  cuda.release(invstd);
  autograd.record('CudnnBatchNormBackward0', [x, weight, bias], [out], saved, ([grad]) => {
    if (!grad) return [null, null, null];
    const gx = cuda.empty(x.shape, x.dtype, `grad of ${label} input`);
    const gw = cuda.empty(weight.shape, weight.dtype, `grad of ${label} weight`);
    const gb = cuda.empty(bias.shape, bias.dtype, `grad of ${label} bias`);
    return [gx, gw, gb];
  });
  return out;
}

/*
 * Note [Batch norm past 2^31 elements]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * An NCHW input of 2^31 elements or more (ResNet-18's first batch norm at a batch of 6643: 5.3 billion) runs
 * aten/src/ATen/native/cuda/Normalization.cu, 64-bit indexed (`batch_norm_choose_impl`: Impl::General):
 * - forward: `batch_norm_cuda` allocates the output, save_mean and save_invstd; `batch_norm_mean_var` calls
 *   `var_mean_out`, whose two-output reduction (ReduceOpsUtils.h `make_reduction`) converts a bf16 input to fp32
 *   first (only fp16 is read as it is): a transient copy of 4 bytes an element. The TensorIterator is split in
 *   halves along its largest dimension until every operand's byte offsets fit 32 bits (`with_32bit_indexing`), the
 *   partial Welford results kept in an accumulation buffer of [C] x 16 bytes; each piece is a reduction with its own
 *   staging buffer and semaphores (tensor/reduce-config.ts), freed as it ends.
 * - backward (`batch_norm_backward_cuda`, not the fused kernel): `batch_norm_backward_reduce` allocates sum_dy,
 *   sum_dy_xmu, the weight's and the bias's gradients ([C] each), then `batch_norm_elementwise_backward_train` the
 *   input's gradient; sum_dy_xmu and sum_dy die as the function returns.
 * Recorded on the H100 (the whole-GPU ResNet-18 AMP bf16 run at 6643): 21,332,426,752 B copied, a 1,024 B
 * accumulation buffer, 16 pieces of 40,960 + 256 B.
 */
function nativeBatchNorm2d(rt: Runtime, x: Tensor, weight: Tensor, bias: Tensor, label: string): Tensor {
  const { cuda, autograd } = rt;
  const [n, c, h, w] = x.shape as [number, number, number, number];
  const needs = autograd.needsGrad([x, weight, bias]);
  const savedInput = autograd.saveInputs(needs, [x]);
  const out = cuda.empty(x.shape, x.dtype, label, 'activation');
  const mean = cuda.empty([c], 'float32', `${label} save_mean`, 'activation');
  const invstd = cuda.empty([c], 'float32', `${label} save_invstd`, 'activation');
  const copy = x.dtype === 'bfloat16' ? cuda.empty(x.shape, 'float32', `${label} var_mean: input.to(float)`, 'temporary') : null;
  const elementBytes = copy ? 4 : DTYPE_BYTES[x.dtype];
  // with_32bit_indexing (TensorIterator::get_dim_to_split): halves the dimension with the largest byte extent until
  // every piece's element count and byte offsets fit 32 bits; the pieces keep the whole tensor's strides
  const stride = { n: c * h * w * elementBytes, c: h * w * elementBytes, hw: elementBytes };
  const pieces: { n: number; c: number; hw: number }[] = [];
  const pending = [{ n, c, hw: h * w }];
  while (pending.length > 0) {
    const p = pending.pop()!;
    const extent = { n: (p.n - 1) * stride.n, c: (p.c - 1) * stride.c, hw: (p.hw - 1) * stride.hw };
    if (p.n * p.c * p.hw <= kInt32Max && 1 + extent.n + extent.c + extent.hw <= kInt32Max) {
      pieces.push(p);
      continue;
    }
    const dim = extent.n >= extent.c && extent.n >= extent.hw ? 'n' : extent.c >= extent.hw ? 'c' : 'hw';
    const half = Math.floor(p[dim] / 2);
    pending.push({ ...p, [dim]: p[dim] - half }, { ...p, [dim]: half });
  }
  if (pieces.length > 1) {
    const acc = cuda.empty([c * kWelfordAccumulateBytes], 'uint8', `${label} var_mean: accumulation buffer`, 'workspace');
    for (const piece of pieces) {
      cuda.reduction(
        { numOutputs: piece.c, inputsPerOutput: piece.n * piece.hw, reduceFastest: piece.hw > 1, elementBytes, accumulateBytes: kWelfordAccumulateBytes },
        `${label} var_mean`,
      );
    }
    cuda.release(acc);
  }
  if (copy) cuda.release(copy);
  const saved = needs ? [...savedInput, cuda.ref(mean), cuda.ref(invstd)] : [];
  cuda.release(mean);
  cuda.release(invstd);
  autograd.record('NativeBatchNormBackward0', [x, weight, bias], [out], saved, ([grad]) => {
    if (!grad) return [null, null, null];
    const sumDy = cuda.empty([c], 'float32', `${label} backward: sum_dy`, 'temporary');
    const sumDyXmu = cuda.empty([c], 'float32', `${label} backward: sum_dy_xmu`, 'temporary');
    const gw = cuda.empty(weight.shape, weight.dtype, `grad of ${label} weight`);
    const gb = cuda.empty(bias.shape, bias.dtype, `grad of ${label} bias`);
    const gx = cuda.empty(x.shape, grad.dtype, `grad of ${label} input`);
    cuda.release(sumDyXmu);
    cuda.release(sumDy);
    return [gx, gw, gb];
  });
  return out;
}

/** `F.relu(x, inplace=True)`: the same storage; ReluBackward0 saves the result (the tensor itself). */
export function reluInPlace(rt: Runtime, x: Tensor, label: string): Tensor {
  const { cuda, autograd } = rt;
  const out = cuda.ref(x);
  const saved = autograd.needsGrad([x]) ? [cuda.ref(x)] : [];
  autograd.record('ReluBackward0', [x], [out], saved, ([grad]) => [grad ? cuda.empty(x.shape, grad.dtype, `grad of ${label}`) : null]);
  return out;
}

/** `out += other` (same shapes): AddBackward0 hands the gradient to both; the same storage. */
export function addInPlace(rt: Runtime, out: Tensor, other: Tensor): Tensor {
  const { cuda, autograd } = rt;
  const result = cuda.ref(out);
  autograd.record('AddBackward0', [out, other], [result], [], ([grad]) => (grad ? [cuda.ref(grad), cuda.ref(grad)] : [null, null]));
  return result;
}

/** `F.max_pool2d(x, k, s, p)`: output then int64 indices (saved); backward allocates the input's gradient. */
export function maxPool2d(rt: Runtime, x: Tensor, spec: { kernel: number; stride: number; padding: number }, label: string): Tensor {
  const { cuda, autograd } = rt;
  const [b, c, size] = x.shape as [number, number, number, number];
  const o = outputSize(size, spec);
  const needs = autograd.needsGrad([x]);
  const savedInput = autograd.saveInputs(needs, [x]);
  const out = cuda.empty([b, c, o, o], x.dtype, label, 'activation');
  const indices = cuda.empty([b, c, o, o], 'int64', `${label} indices`, 'activation');
  const saved = needs ? [...savedInput, cuda.ref(indices)] : [];
  cuda.release(indices);
  autograd.record('MaxPool2DWithIndicesBackward0', [x], [out], saved, ([grad]) => [grad ? cuda.empty(x.shape, grad.dtype, `grad of ${label}`) : null]);
  return out;
}

/** `F.adaptive_avg_pool2d(x, 1)`: the output; backward allocates the input's gradient. */
export function adaptiveAvgPool2d(rt: Runtime, x: Tensor, label: string): Tensor {
  const { cuda, autograd } = rt;
  const [b, c] = x.shape as [number, number];
  const out = cuda.empty([b, c, 1, 1], x.dtype, label, 'activation');
  autograd.record('MeanBackward1', [x], [out], [], ([grad]) => [grad ? cuda.empty(x.shape, grad.dtype, `grad of ${label}`) : null]);
  return out;
}
