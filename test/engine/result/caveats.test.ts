/** What an answer assumes and how sure memplan is (engine/result/caveats.ts), from the plan and the GPU's evidence. */
import { describe, expect, it } from 'vitest';
import catalogJson from '../../../resources/gpus.json' with { type: 'json' };
import {
  caveatsFor,
  caveatsSchema,
  findMaxBatch,
  maxBatchResultSchema,
  parseGpuCatalog,
  parsePlan,
  planGpu,
  simulate,
  simulateResultSchema,
  type Caveats,
  type Plan,
} from '../../../engine/index.ts';

const catalog = parseGpuCatalog(catalogJson);
const mlp = (training: Record<string, unknown> = {}, gpu?: Record<string, unknown>): Plan =>
  parsePlan({
    format: 'memplan.plan',
    version: 1,
    name: 'mlp',
    model: { layers: [{ type: 'linear', in_features: 1024, out_features: 1024 }], input_features: 1024 },
    training: { batch_size: 8, precision: 'fp32', optimizer: 'adamw', ...training },
    ...(gpu ? { gpu } : {}),
  });
const on = (plan: Plan) => caveatsFor(plan, planGpu(plan, catalog));
const ids = (c: Caveats) => c.items.map((i) => i.id);
const ASSUMPTIONS = ['parameters_loaded_in_training_dtype', 'standard_step', 'fresh_process', 'steady_state'];

describe('caveats of an answer', () => {
  it('on the H100 SXM the calibration runs were recorded on: the four assumptions, high confidence', () => {
    const c = on(mlp());
    expect(ids(c)).toEqual([...ASSUMPTIONS, 'calibrated_gpu']);
    expect(c.items).toContainEqual({ id: 'calibrated_gpu', gpu: 'h100-sxm' });
    expect(c.items).toContainEqual({ id: 'standard_step', grad_accumulation_steps: 1 });
    expect(c.confidence).toBe('high');
    // a cap below the H100's memory is still the H100
    expect(on(mlp({}, { memory_limit_bytes: 2 ** 34 })).confidence).toBe('high');
  });

  it('says how the model reaches the GPU as its kind is built: from_pretrained, a torchvision constructor, the layers', () => {
    const loaded = (plan: Plan) => on(plan).items.find((i) => i.id === 'parameters_loaded_in_training_dtype');
    expect(loaded(mlp())).toEqual({ id: 'parameters_loaded_in_training_dtype', built_by: 'layers' });
    const with_ = (model: Record<string, unknown>) => parsePlan({ format: 'memplan.plan', version: 1, model, training: { batch_size: 2, seq_len: 64, precision: 'bf16' } });
    expect(loaded(with_({ preset: 'gpt2' }))).toMatchObject({ built_by: 'from_pretrained' });
    expect(loaded(with_({ hf_config: { model_type: 'llama', hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2, num_attention_heads: 4, vocab_size: 100 } }))).toMatchObject({ built_by: 'from_pretrained' });
    expect(loaded(with_({ preset: 'resnet50' }))).toMatchObject({ built_by: 'torchvision' });
    expect(loaded(with_({ torchvision: 'vit_b_16', num_classes: 10 }))).toMatchObject({ built_by: 'torchvision' });
    // results saved before memplan said it read as what it said then
    expect(caveatsSchema.parse({ confidence: 'high', items: [{ id: 'parameters_loaded_in_training_dtype' }] }).items[0]).toEqual({ id: 'parameters_loaded_in_training_dtype', built_by: 'from_pretrained' });
  });

  it('carries the accumulation steps of the plan', () => {
    expect(on(mlp({ grad_accumulation_steps: 4 })).items).toContainEqual({ id: 'standard_step', grad_accumulation_steps: 4 });
  });

  it('another NVIDIA GPU: the H100 workspaces and each catalog figure not measured on it, medium confidence', () => {
    const a100 = on(mlp({}, { name: 'a100-40gb' }));
    expect(a100.confidence).toBe('medium');
    expect(a100.items).toContainEqual({ id: 'workspaces_from_h100', gpu: 'a100-40gb' });
    // resources/gpus.json: the A100's memory was read on the card, its CUDA context is an estimate
    expect(a100.items).toContainEqual({ id: 'gpu_figures_not_measured', gpu: 'a100-40gb', total_memory: 'measured', non_pytorch: 'unconfirmed' });
    // the H200's figures were both measured: no such caveat, but the workspaces are still the H100's
    const h200 = on(mlp({}, { name: 'h200' }));
    expect(ids(h200)).toContain('workspaces_from_h100');
    expect(ids(h200)).not.toContain('gpu_figures_not_measured');
    expect(h200.confidence).toBe('medium');
  });

  it('an AMD GPU (ROCm, never recorded): low confidence', () => {
    expect(on(mlp({}, { name: 'mi300x' })).confidence).toBe('low');
  });

  it('a cap larger than the H100 describes a custom GPU: medium', () => {
    const c = on(mlp({}, { memory_limit_bytes: 200 * 2 ** 30 }));
    expect(ids(c)).toContain('custom_gpu');
    expect(ids(c)).not.toContain('calibrated_gpu');
    expect(c.confidence).toBe('medium');
  });

  it('a device built by hand (no catalog evidence): its figures count as not measured', () => {
    const h100 = catalog.gpus.find((g) => g.id === 'h100-sxm')!;
    const { id: _id, total_memory_source: _t, non_pytorch_source: _n, ...bare } = h100;
    const c = caveatsFor(mlp(), bare);
    expect(c.items).toContainEqual({ id: 'gpu_figures_not_measured', gpu: h100.name, total_memory: 'unknown', non_pytorch: 'unknown' });
    expect(c.confidence).toBe('medium');
  });

  it('amp_fp16 assumes every step updates, unless the plan says how many the GradScaler skips', () => {
    expect(ids(on(mlp({ precision: 'amp_fp16' })))).toContain('grad_scaler_steps_update');
    expect(ids(on(mlp({ precision: 'amp_fp16', grad_scaler_skipped_steps: 2 })))).not.toContain('grad_scaler_steps_update');
    expect(ids(on(mlp({ precision: 'amp_bf16' })))).not.toContain('grad_scaler_steps_update');
  });

  it('names the known gap of ViT under reentrant checkpointing (docs/engine.md), not for a ResNet', () => {
    const vit = (model: string, checkpointing: string) =>
      parsePlan({ format: 'memplan.plan', version: 1, name: model, model: { torchvision: model }, training: { batch_size: 2, precision: 'amp_bf16', optimizer: 'adamw', activation_checkpointing: checkpointing } });
    const gap = on(vit('vit_b_16', 'reentrant'));
    expect(gap.items).toContainEqual({ id: 'known_gap', gap: 'vit_reentrant_checkpointing' });
    expect(gap.confidence).toBe('medium');
    expect(ids(on(vit('vit_b_16', 'non_reentrant')))).not.toContain('known_gap');
    expect(ids(on(vit('resnet50', 'reentrant')))).not.toContain('known_gap');
  });
});

describe('results carry their caveats', () => {
  it('simulate and max-batch results hold what caveatsFor says, and survive the schema and a structured clone', () => {
    const plan = mlp({}, { name: 'l4' });
    const device = planGpu(plan, catalog);
    const expected = caveatsFor(plan, device);
    const sim = simulate(plan, { device, timelinePoints: 0 });
    expect(sim.caveats).toEqual(expected);
    expect(simulateResultSchema.parse(structuredClone(sim)).caveats).toEqual(expected);
    const mb = findMaxBatch({ ...plan, gpu: { memory_limit_bytes: 2 ** 28 } }, { device });
    expect(maxBatchResultSchema.parse(structuredClone(mb)).caveats).toEqual(caveatsFor({ ...plan, gpu: { memory_limit_bytes: 2 ** 28 } }, device));
    expect(caveatsSchema.parse(mb.caveats).confidence).toBe('medium');
  });

  it('a result stored before memplan reported caveats reads as null', () => {
    const plan = mlp();
    const { caveats: _c, ...old } = simulate(plan, { device: planGpu(plan, catalog), timelinePoints: 0 });
    expect(simulateResultSchema.parse(old).caveats).toBeNull();
  });
});
