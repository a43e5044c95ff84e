/**
 * The caveat conv_workspaces_estimated (engine/result/caveats.ts): an answer whose convolutions' cuDNN workspaces
 * come from no measured row of the H100's table says so, at medium confidence. Measured case: ResNet-50 AMP bf16 on
 * the whole H100 (test/fixtures/boundary-suite), 1864 while its workspaces were interpolated, 1861 real.
 */
import { describe, expect, it } from 'vitest';
import { planGpu } from '../../../cli/gpus.ts';
import { caveatsText } from '../../../cli/caveats.ts';
import { parsePlan } from '../../../engine/plan/parse.ts';
import { findMaxBatch } from '../../../engine/search/max-batch.ts';
import { simulate } from '../../../engine/train/simulate.ts';

const resnet = (model: Record<string, unknown>, batch: number, precision = 'amp_bf16') =>
  parsePlan({ format: 'memplan.plan', version: 1, model, training: { batch_size: batch, image_size: 224, precision, optimizer: 'sgd_momentum', steps: 1 }, gpu: { name: 'h100-sxm' } });
const caveatsAt = (plan: ReturnType<typeof resnet>) => simulate(plan, { device: planGpu(plan), untilSteady: false, timelinePoints: 0, peakDetails: false }).caveats!;

describe('cuDNN workspaces the table has not measured', () => {
  it('are said at a batch between measured rows, and lower the confidence', () => {
    const c = caveatsAt(resnet({ torchvision: 'resnet50' }, 1000));
    expect(c.items).toContainEqual({ id: 'conv_workspaces_estimated', batch: 1000 });
    expect(c.confidence).toBe('medium');
    expect(caveatsText(c).at(-1)).toMatch(/cuDNN's convolution workspaces at batch 1,000 were not measured/);
  });

  it('are not said where every convolution has a measured row (every batch to 512, and 1850-1870 in bf16)', () => {
    for (const batch of [128, 512, 1861]) {
      const c = caveatsAt(resnet({ torchvision: 'resnet50' }, batch));
      expect(c.items.map((i) => i.id), String(batch)).not.toContain('conv_workspaces_estimated');
      expect(c.confidence).toBe('high');
    }
  });

  it("a search's answer carries its own simulation's caveat", () => {
    const measured = resnet({ torchvision: 'resnet50' }, 128);
    const r = findMaxBatch(measured, { device: planGpu(measured) });
    expect(r.max_batch).toBe(1861);
    expect(r.caveats!.items.map((i) => i.id)).not.toContain('conv_workspaces_estimated');
    // fp32: the answer lies past the measured rows
    const fp32 = resnet({ torchvision: 'resnet50' }, 128, 'fp32');
    const f = findMaxBatch(fp32, { device: planGpu(fp32) });
    expect(f.max_batch).toBeGreaterThan(512);
    expect(f.caveats!.items).toContainEqual({ id: 'conv_workspaces_estimated', batch: f.max_batch });
  }, 120_000);
});
