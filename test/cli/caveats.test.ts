/** Every answer says what it assumes and how confident memplan is, as ids in --json and briefly in the text (issue 13). */
import { describe, expect, it } from 'vitest';
import { caveatsSchema, gpuListSchema } from '../../engine/index.ts';
import { json, memplan } from './support.ts';

const mlp = 'examples/mlp-fp16.plan.json';
const ASSUMPTIONS = ['parameters_loaded_in_training_dtype', 'standard_step', 'fresh_process', 'steady_state'];

describe('caveats', () => {
  it('simulate --json: the assumptions as ids, high confidence on the calibrated H100', () => {
    const caveats = caveatsSchema.parse(json(['simulate', mlp, '--json']).caveats);
    expect(caveats.items.map((i) => i.id)).toEqual(expect.arrayContaining([...ASSUMPTIONS, 'calibrated_gpu']));
    expect(caveats.confidence).toBe('high');
  });

  it('on another GPU: the H100 workspaces, and the figures the catalog did not measure, lower the confidence', () => {
    const catalog = gpuListSchema.parse(json(['gpus', '--json'])).gpus;
    const a100 = caveatsSchema.parse(json(['max-batch', mlp, '--gpu', 'a100-40gb', '--json']).caveats);
    expect(a100.confidence).toBe('medium');
    expect(a100.items).toContainEqual({ id: 'workspaces_from_h100', gpu: 'a100-40gb' });
    const t4 = catalog.find((g) => g.id === 't4')!;
    const t4Caveats = caveatsSchema.parse(json(['simulate', mlp, '--gpu', 't4', '--batch-size', '8', '--json']).caveats);
    // the T4's total memory is not measured on the card (resources/gpus.json): said so
    expect(t4.total_memory_source).not.toBe('measured');
    expect(t4Caveats.items).toContainEqual(expect.objectContaining({ id: 'gpu_figures_not_measured', gpu: 't4', total_memory: t4.total_memory_source }));
    const amd = caveatsSchema.parse(json(['simulate', mlp, '--gpu', 'mi300x', '--json']).caveats);
    expect(amd.confidence).toBe('low');
  });

  it('bf16 on a GPU without bf16 arithmetic (below compute capability 8.0): emulated, attention on the math backend', () => {
    const llama = ['examples/llama-3-8b-bf16.plan.json', '--seq-len', '128', '--no-advice', '--json'];
    const t4 = caveatsSchema.parse(json(['simulate', ...llama, '--gpu', 't4']).caveats);
    expect(t4.items).toContainEqual({ id: 'bf16_emulated', gpu: 't4' });
    expect(t4.confidence).toBe('medium');
    expect(caveatsSchema.parse(json(['simulate', ...llama, '--gpu', 't4', '--precision', 'fp16']).caveats).items.map((i) => i.id)).not.toContain('bf16_emulated');
    expect(caveatsSchema.parse(json(['simulate', ...llama, '--gpu', 'a100-80gb']).caveats).items.map((i) => i.id)).not.toContain('bf16_emulated');
    expect(memplan(['simulate', 'examples/llama-3-8b-bf16.plan.json', '--seq-len', '128', '--no-advice', '--gpu', 'v100-32gb']).stdout).toMatch(/v100-32gb has no bf16 arithmetic \(compute capability below 8\.0\): PyTorch emulates bf16/);
  });

  it('names the known gaps of docs/engine.md that apply to the plan', () => {
    const amp = caveatsSchema.parse(json(['simulate', 'examples/resnet50-amp.plan.json', '--batch-size', '8', '--json']).caveats);
    expect(amp.items.map((i) => i.id)).toContain('grad_scaler_steps_update');
    const vit = caveatsSchema.parse(json(['simulate', 'examples/resnet50-amp.plan.json', '--batch-size', '2', '--checkpointing', 'reentrant', '--json']).caveats);
    expect(vit.items.map((i) => i.id)).not.toContain('known_gap'); // a ResNet: not the ViT gap
  });

  it('the text ends with what it assumes and the confidence with its grounds', () => {
    const h100 = memplan(['simulate', mlp]).stdout;
    // the MLP example is a layer list: built as nn.Modules, not loaded with from_pretrained
    expect(h100).toMatch(/^Assumes: the layers built on the CPU as nn\.Modules, in their training dtype, then \.to\("cuda"\); the standard step .*a fresh process; the steady state\.$/m);
    expect(memplan(['simulate', 'examples/llama-3-8b-bf16.plan.json', '--seq-len', '128', '--no-advice']).stdout).toMatch(/^Assumes: weights loaded as from_pretrained\(\.\.\., dtype=\.\.\.\) then \.to\("cuda"\); /m);
    expect(memplan(['simulate', 'examples/resnet50-amp.plan.json', '--batch-size', '8', '--no-advice']).stdout).toMatch(/^Assumes: the model built by torchvision\.models on the CPU, in its training dtype, then \.to\("cuda"\); /m);
    expect(h100).toMatch(/^Confidence: high: h100-sxm is the GPU memplan's calibration runs were recorded on\.$/m);
    const l4 = memplan(['max-batch', mlp, '--gpu', 'l4']).stdout;
    expect(l4).toMatch(/^Confidence: medium: the cuBLAS and cuDNN workspaces are the H100's, not measured on l4/m);
  });
});
