/**
 * nn.MultiheadAttention's batch-first output is a transposed view, and its input is transposed for in_proj: where
 * that memory order travels with a gradient (TensorImpl.memoryOrder), PyTorch copies or steals by it.
 *
 * torchvision's ViT under reentrant checkpointing (engine/models/vit.ts, Autograd.checkpointReentrant), recorded on
 * the H100 (test/fixtures/calibration/vit_*_reentrant*): the residual stream is [N, B, E] in memory (`x + input` is
 * laid out as its first operand, the attention's output), and that decides three things in the backward:
 * - AccumulateGrad steals the gradient of a checkpoint's detached input only where it obeys the input's layout
 *   (`obeys_layout_contract`), else copies it (`clone_obey_contract`): at the last block, whose gradient comes
 *   contiguous from encoder.ln, and at the first, whose input (patches plus positions) is contiguous; the blocks
 *   between get their gradient in the stream's own order and steal it;
 * - a linear's output view reshapes its gradient back for the mm: a copy for one in the stream's order;
 * - out_proj's view of the attention result copies its gradient only where it came contiguous (the last block).
 * Before these were modelled, memplan freed the last block's gradient where PyTorch copied it, and reserved up to
 * 6.3% less than these runs; it promised ViT-L/16 410 under 16 GiB where 403 is the largest that fits
 * (test/fixtures/boundary-suite: 403 fits, 404-406 run out).
 *
 * A layer list's `residual` of layer_norm and self_attention (`x + attention(norm(x))`): the gradient of the
 * attention's input comes back transposed, and the layer norm's backward copies it (`dY.contiguous()`).
 */
import { describe, expect, it } from 'vitest';
import { parsePlan } from '../../../engine/plan/parse.ts';
import { allocationsOf, expectAsRecorded, expectSameRequestsPlacedElsewhere, recording } from './allocations.ts';

describe('ViT with reentrant checkpointing, recorded on the H100', () => {
  it('ViT-L/16 in AMP bf16 with AdamW: both peaks to the byte (every allocation and free: test/engine/train/calibration.test.ts)', () => {
    expectAsRecorded('vit_l_16_amp_bf16_adamw_ckpt_reentrant_b24');
  });

  it.each(['vit_b_16_amp_fp16_ckpt_reentrant_sgdm', 'vit_b_16_fp32_sgdm_ckpt_reentrant_b16'])("%s (built on the CPU, moved with .to(\"cuda\")): every allocation and free in order; the driver placed segments among the host's mappings, and with its own segment addresses both peaks are exact (memplan's own: test/engine/train/calibration.test.ts, NEAR)", (name) => {
    expectSameRequestsPlacedElsewhere(name);
  });

  it.each([
    ['vit_b_16_fp32_sgdm_ckpt_reentrant_b16', 12],
    ['vit_l_16_amp_bf16_adamw_ckpt_reentrant_b24', 24],
  ])("%s: per step, the checkpoint input's gradient copied at the last and the first block, the MLP's fold copying it in every block but the last, out_proj's view in the last only", (name, layers) => {
    const plan = parsePlan(recording(name).plan);
    const all = allocationsOf(plan);
    const steps = 3;
    const [batch, image] = [plan.training.batch_size, 224];
    const stream = batch * ((image / 16) ** 2 + 1) * (layers === 24 ? 1024 : 768) * 4; // [B, N, E] fp32
    const copies = all.filter((a) => a.label === 'checkpoint input (detached).grad');
    expect(copies.length).toBe(2 * steps);
    for (const c of copies) expect(c.size).toBe(stream);
    const folds = all.filter((a) => /^grad of encoder\.layers\.encoder_layer_\d+\.mlp\.3 \(reshaped\)$/.test(a.label));
    expect(folds.length).toBe((layers - 1) * steps);
    expect(folds.some((a) => a.label.includes(`encoder_layer_${layers - 1}.`))).toBe(false);
    const outProj = all.filter((a) => a.label.endsWith('out_proj (viewed) (reshaped)'));
    expect(outProj.map((a) => a.label)).toEqual(Array(steps).fill(`grad of encoder.layers.encoder_layer_${layers - 1}.self_attention out_proj (viewed) (reshaped)`));
  });

  it('without reentrant checkpointing nothing is copied for the layout (no detached inputs; the gradient stays contiguous)', () => {
    const base = recording('vit_b_16_fp32_sgdm_ckpt_reentrant_b16').plan;
    const all = allocationsOf(parsePlan({ ...base, training: { ...base.training, activation_checkpointing: 'non_reentrant' } }));
    expect(all.some((a) => a.label === 'checkpoint input (detached).grad')).toBe(false);
    expect(all.some((a) => /mlp\.3 \(reshaped\)$/.test(a.label))).toBe(false);
  });

  it("a layer list's transformer (layers_transformer_amp_bf16_ckpt_adam_forloop): every allocation and free in order, the layer norm before each attention copying the gradient that comes back transposed", () => {
    expectSameRequestsPlacedElsewhere('layers_transformer_amp_bf16_ckpt_adam_forloop');
    const all = allocationsOf(parsePlan(recording('layers_transformer_amp_bf16_ckpt_adam_forloop').plan));
    const copies = all.filter((a) => a.label.endsWith('backward: grad.contiguous()')).map((a) => a.label);
    // 4 attention residuals (layers.1, a repeat of 4 bodies), 3 steps
    expect(copies).toHaveLength(4 * 3);
    for (const label of copies) expect(label).toMatch(/^layers\.1\.bodies\.\d\.0\.body\.0 \(layer_norm\) backward: grad\.contiguous\(\)$/);
  });
});

