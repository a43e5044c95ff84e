/**
 * `torch.amp.GradScaler` (`torch/amp/grad_scaler.py`) as memory sees it: a handful of 0-dim tensors, each a
 * 512-byte block of the small pool. Order measured on the H100 with Python stacks (PyTorch 2.11):
 * - scale(): on first use `_scale` (fp32) and `_growth_tracker` (int32); then `loss * _scale`, whose
 *   MulBackward0 makes `grad * _scale` in backward.
 * - step() with an optimizer that unscales itself (fused Adam/AdamW/SGD: `_step_supports_amp_scaling`):
 *   `_check_inf_per_device` makes found_inf and a dummy inv_scale, `_unscale_grads_` copies both per device and
 *   drops the inv_scale copy; the two locals die; then `sum(found_inf copies)` and the grad_scale handed to the
 *   optimizer; after the step the grad_scale attribute and the summed found_inf die.
 * - step() otherwise: `unscale_`: `_scale.double().reciprocal().float()` (two 8-byte temporaries), found_inf,
 *   the per-device copies (the inv_scale copy dropped at once), then its locals die; then optimizer.step().
 * - update(): the per-device found_inf copy dies with the per-optimizer state.
 */
import type { Optimizer } from './optimizer.ts';
import { mul } from '../ops/elementwise.ts';
import type { Runtime } from '../ops/runtime.ts';
import type { Storage, Tensor } from '../tensor/tensor.ts';

export class GradScaler {
  private scaleTensor: Tensor | null = null;
  private growthTracker: Tensor | null = null;
  /** The per-device found_inf copy kept in the per-optimizer state until update(). */
  private foundInfPerDevice: Tensor | null = null;

  /** `scaler.scale(loss)`: a new scalar the caller runs backward from and then drops. */
  scale(rt: Runtime, loss: Tensor): Tensor {
    const { cuda } = rt;
    if (!this.scaleTensor) {
      this.scaleTensor = cuda.empty([], 'float32', 'GradScaler._scale', 'optimizer_state');
      this.growthTracker = cuda.empty([], 'int32', 'GradScaler._growth_tracker', 'optimizer_state');
    }
    return mul(rt, loss, this.scaleTensor, 'scaler.scale(loss)');
  }

  /** What the scaler keeps for the process (made on first use: Note [Replayed second step], second-step.ts). */
  storages(): Storage[] {
    const kept: Storage[] = [];
    if (this.scaleTensor) kept.push(this.scaleTensor.storage);
    if (this.growthTracker) kept.push(this.growthTracker.storage);
    return kept;
  }

  /** `_unscale_grads_`: per-device copies of found_inf and inv_scale; the inv_scale copy dies on return. */
  private unscaleGrads(rt: Runtime): void {
    const { cuda } = rt;
    this.foundInfPerDevice = cuda.empty([], 'float32', 'found_inf (per device)', 'temporary');
    const invScaleCopy = cuda.empty([], 'float32', 'inv_scale (per device)', 'temporary');
    cuda.release(invScaleCopy);
  }

  /**
   * `scaler.step(optimizer)`. `overflowed`: the gradients held an inf or nan. A fused optimizer gets found_inf and
   * skips its update itself (its state is still made); otherwise `optimizer.step()` is not called at all.
   */
  step(rt: Runtime, optimizer: Optimizer, overflowed = false): void {
    const { cuda } = rt;
    if (optimizer.supportsAmpScaling) {
      const foundInf = cuda.empty([], 'float32', 'found_inf', 'temporary');
      const dummyInvScale = cuda.empty([], 'float32', 'dummy inv_scale', 'temporary');
      this.unscaleGrads(rt);
      cuda.release(dummyInvScale);
      cuda.release(foundInf);
      const summed = cuda.empty([], 'float32', 'sum(found_inf)', 'temporary');
      const gradScale = cuda.empty([], 'float32', 'optimizer.grad_scale', 'temporary');
      optimizer.step();
      cuda.release(gradScale);
      cuda.release(summed);
      return;
    }
    const asDouble = cuda.empty([], 'float64', '_scale.double()', 'temporary');
    const reciprocal = cuda.empty([], 'float64', '.reciprocal()', 'temporary');
    cuda.release(asDouble);
    const invScale = cuda.empty([], 'float32', 'inv_scale', 'temporary');
    cuda.release(reciprocal);
    const foundInf = cuda.empty([], 'float32', 'found_inf', 'temporary');
    this.unscaleGrads(rt);
    cuda.release(invScale);
    cuda.release(foundInf);
    if (!overflowed) optimizer.step();
  }

  /** `scaler.update()`: `_amp_update_scale_` works in place; the per-optimizer state is reset. */
  update(rt: Runtime): void {
    rt.cuda.release(this.foundInfPerDevice);
    this.foundInfPerDevice = null;
  }
}
