/**
 * The cuDNN workspace table (resources/cudnn-workspaces-h100.json.gz) as engine/ops/conv.ts reads it, against the
 * recording of ResNet-18 fp32 with SGD momentum at batch 371 under 8 GiB on the H100
 * (test/fixtures/boundary-suite/recordings/resnet18_fp32_sgdm_cap8g_b371): past the 1-256 rows, a line through
 * the last two rows missed the workspaces cuDNN's heuristics chose there, and the search promised 371 where 370 is
 * the largest that fits.
 */
import { describe, expect, it } from 'vitest';
import { convWorkspaceData } from '../../../cli/gpus.ts';
import { convWorkspacesFor } from '../../../engine/gpu/device.ts';

const table = convWorkspacesFor(convWorkspaceData())!;
const conv = (inChannels: number, outChannels: number, kernel: number, stride: number, padding: number) => ({ inChannels, outChannels, kernel, stride, padding });

describe('cuDNN workspaces past batch 256', () => {
  it('are the ones the H100 allocated in ResNet-18 at batch 371', () => {
    // the recording's forward workspaces of layer2's and layer4's 3x3 convolutions
    expect(table.lookup(conv(128, 128, 3, 1, 1), 28, 'float32', 371)!.forward).toEqual([298_434_707]);
    expect(table.lookup(conv(512, 512, 3, 1, 1), 7, 'float32', 371)!.forward).toEqual([99_627_763]);
  });

  it("keep the final fallback plan's workspace that does not grow with the batch past the measured rows", () => {
    // layer4's 3x3 convolution, weight pass: the plan that runs with room for nothing else needs 18,432 B at every
    // measured batch (the recording at 371 too); scaling it by the batch would give 26,712 B at 371 from 256
    const weightPass = (batch: number) => table.lookup(conv(512, 512, 3, 1, 1), 7, 'float32', batch)!.fallbacks![2]!;
    expect(weightPass(371).final).toEqual([18_432]);
    expect(weightPass(900).final).toEqual([18_432]);
    // the failed plans are activation-sized: they still grow with the batch past the table
    expect(weightPass(900).failed[0]!).toBeGreaterThan(weightPass(512).failed[0]!);
  });

  it('extrapolate a final workspace that grows with the batch along its last two rows', () => {
    const rows = (batch: number) => table.lookup(conv(64, 64, 1, 1, 0), 56, 'float32', batch)!.fallbacks![2]!.final;
    const [a, b] = [rows(255), rows(256)];
    if (a.length === 1 && b.length === 1 && a[0] !== b[0]) expect(rows(300)).toEqual([b[0]! + (b[0]! - a[0]!) * 44]);
    else expect(rows(300)).toEqual(b);
  });
});
