/**
 * Optimizer steps (`torch/optim/sgd.py`, `adam.py`, `adamw.py`) as memory sees them: the state created on the
 * first step, and the temporaries of each implementation.
 * - SGD: no state; foreach and fused update in place.
 * - SGD with momentum: a momentum buffer per parameter on the first step (`clone(grad)` for foreach and the
 *   for-loop, `empty_like` for fused), in parameter order (foreach: dtype group by group, `dtypeGroups`).
 * - Adam/AdamW: per parameter `exp_avg` and `exp_avg_sq` (`zeros_like`); fused keeps `step` on the GPU too (a
 *   0-dim fp32 tensor first). foreach makes `_foreach_sqrt(exp_avg_sqs)`: a temporary as large as all
 *   parameters of one dtype group at once, group after group (`dtypeGroups`). The for-loop makes `exp_avg_sq.sqrt() / bias_correction2_sqrt` per
 *   parameter, the previous `denom` living until the next one exists.
 */
import type { Parameter } from '../autograd/engine.ts';
import type { TrainingSpec } from '../plan/schema.ts';
import type { CudaDevice } from '../tensor/cuda.ts';
import type { Tensor } from '../tensor/tensor.ts';

export class Optimizer {
  private readonly state = new Map<Parameter, Tensor[]>();
  private readonly kind: TrainingSpec['optimizer'];
  private readonly impl: TrainingSpec['optimizer_impl'];
  private readonly params: readonly Parameter[];
  private readonly cuda: CudaDevice;

  constructor(cuda: CudaDevice, params: readonly Parameter[], kind: TrainingSpec['optimizer'], impl: TrainingSpec['optimizer_impl']) {
    this.cuda = cuda;
    this.params = params;
    this.kind = kind;
    this.impl = impl;
  }

  /** Fused implementations unscale the gradients themselves (`_step_supports_amp_scaling`). */
  get supportsAmpScaling(): boolean {
    return this.impl === 'fused';
  }

  step(): void {
    const cuda = this.cuda;
    const withGrad = this.params.filter((p) => p.grad !== null);
    if (this.kind === 'sgd') return;
    if (this.kind === 'sgd_momentum') {
      // foreach makes the buffers (`clone(grad)`) in its loop over the dtype groups (_multi_tensor_sgd)
      for (const p of this.impl === 'foreach' ? dtypeGroups(withGrad).flat() : withGrad) {
        if (!this.state.has(p)) this.state.set(p, [cuda.empty(p.tensor.shape, p.tensor.dtype, `${p.name} momentum_buffer`, 'optimizer_state')]);
      }
      return;
    }
    // Adam / AdamW: _init_group creates the state parameter by parameter.
    for (const p of withGrad) {
      if (this.state.has(p)) continue;
      const s: Tensor[] = [];
      if (this.impl === 'fused') s.push(cuda.empty([], 'float32', `${p.name} step`, 'optimizer_state'));
      s.push(cuda.empty(p.tensor.shape, p.tensor.dtype, `${p.name} exp_avg`, 'optimizer_state'));
      s.push(cuda.empty(p.tensor.shape, p.tensor.dtype, `${p.name} exp_avg_sq`, 'optimizer_state'));
      this.state.set(p, s);
    }
    if (this.impl === 'foreach') {
      // _group_tensors_by_device_and_dtype, then per group: exp_avg_sq_sqrt = torch._foreach_sqrt(exp_avg_sqs)
      // `exp_avg_sq_sqrt` is rebound group after group: a group's list dies once the next one's exists, the last
      // when the step returns; a list dies last item first
      let previous: Tensor[] = [];
      const release = (list: Tensor[]) => {
        for (let i = list.length - 1; i >= 0; i--) cuda.release(list[i]);
      };
      for (const group of dtypeGroups(withGrad)) {
        const sqrt = group.map((p) => cuda.empty(p.tensor.shape, p.tensor.dtype, `${p.name} exp_avg_sq.sqrt() (foreach)`));
        release(previous);
        previous = sqrt;
      }
      release(previous);
    } else if (this.impl === 'for_loop') {
      let denom: Tensor | null = null;
      for (const p of withGrad) {
        const sqrt = cuda.empty(p.tensor.shape, p.tensor.dtype, `${p.name} exp_avg_sq.sqrt()`);
        const next = cuda.empty(p.tensor.shape, p.tensor.dtype, `${p.name} denom`);
        cuda.release(sqrt);
        cuda.release(denom);
        denom = next;
      }
      cuda.release(denom);
    }
  }

  /** `zero_grad(set_to_none=True)`: every gradient is dropped, in parameter order. */
  zeroGrad(): void {
    for (const p of this.params) {
      this.cuda.release(p.grad);
      p.grad = null;
    }
  }
}

/**
 * The parameters by dtype, groups in the order foreach implementations visit them: that of the `std::unordered_map`
 * `_group_tensors_by_first_tensors_device_and_dtype` returns (ATen ForeachUtils.h, keyed by device and dtype with
 * ParamsHash). libstdc++ links each new key's node first, so groups in buckets of their own come back in the reverse
 * order of their first parameters; fp16, fp32 and bf16 on one GPU hash to distinct buckets. Measured:
 * lora_bert_base_cls_bf16_qv_adamw (the bf16 classifier copy's group before the fp32 adapters').
 */
function dtypeGroups(params: readonly Parameter[]): Parameter[][] {
  const groups = new Map<string, Parameter[]>();
  for (const p of params) {
    const g = groups.get(p.tensor.dtype) ?? [];
    g.push(p);
    groups.set(p.tensor.dtype, g);
  }
  return [...groups.values()].reverse();
}
