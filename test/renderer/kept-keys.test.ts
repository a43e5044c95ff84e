/**
 * What an opened plan file has that no field of the editor holds is kept, written back beside the fields, listed
 * with its path, and taken out on request (renderer/src/state/kept-keys.ts; the editor in test/e2e/plan-file.e2e.ts).
 */
import { describe, expect, it } from 'vitest';
import { formKeys, keptKeys as keptKeysOf, keptOf, withKept, withoutKept, type FieldObjects, type Kept } from '../../renderer/src/state/kept-keys.ts';

const shown = (model: string, gpu = 'name') => ({ model: formKeys('model', model), gpu: formKeys('gpu', gpu) });

type Fields = { model: Record<string, unknown>; training: Record<string, unknown>; gpu: Record<string, unknown> };
const objects = (f: Fields): FieldObjects => ({ model: f.model, training: f.training, 'training.lora': f.training.lora as Record<string, unknown> | undefined, allocator: { conf: '' }, gpu: f.gpu });

/** The plan the editor writes for its fields and what was kept (as plan-editor.svelte.ts builds it). */
function written(kept: Kept, fields: Fields): Record<string, unknown> {
  const training = withKept(kept, 'training', fields.training);
  if (fields.training.lora) training.lora = withKept(kept, 'training.lora', fields.training.lora as Record<string, unknown>);
  return {
    format: 'memplan.plan',
    version: 1,
    name: '',
    model: withKept(kept, 'model', fields.model),
    training,
    allocator: withKept(kept, 'allocator', { conf: '' }),
    gpu: withKept(kept, 'gpu', fields.gpu),
    ...kept[''],
  };
}
/** The kept keys listed for these fields. */
const keptKeys = (kept: Kept, fields: Fields) => keptKeysOf(kept, objects(fields));

describe('keys no field holds', () => {
  it('a misspelt training key and a top-level comment are kept, listed and taken out', () => {
    const plan = { format: 'memplan.plan', version: 1, comment: 'from the A100 run', model: { preset: 'gpt2' }, training: { batch_size: 8, batchsize: 16 }, gpu: { name: 'h100-sxm' } };
    const kept = keptOf(plan, shown('preset'));
    const fields = { model: { preset: 'gpt2' }, training: { batch_size: 8 }, gpu: { name: 'h100-sxm' } };
    const out = written(kept, fields);
    expect(out.comment).toBe('from the A100 run');
    expect((out.training as Record<string, unknown>).batchsize).toBe(16);
    expect(keptKeys(kept, fields).map((k) => k.path).sort()).toEqual(['comment', 'training.batchsize']);
    const fewer = withoutKept(kept, keptKeys(kept, fields).find((k) => k.path === 'training.batchsize')!);
    const after = written(fewer, fields);
    expect(after.training).toEqual({ batch_size: 8 });
    expect(keptKeys(fewer, fields).map((k) => k.path)).toEqual(['comment']);
  });

  it('a section that is not an object is kept whole in place of the editor’s, not split into characters', () => {
    const plan = { format: 'memplan.plan', version: 1, model: { preset: 'gpt2' }, training: { batch_size: 8 }, gpu: 'h100-sxm' };
    const kept = keptOf(plan, shown('preset'));
    const fields = { model: { preset: 'gpt2' }, training: { batch_size: 8 }, gpu: { name: 'h100-sxm' } };
    const out = written(kept, fields);
    expect(out.gpu).toBe('h100-sxm');
    expect(kept.gpu).toEqual({});
    expect(keptKeys(kept, fields)).toEqual([{ where: '', key: 'gpu', path: 'gpu' }]);
    // taken out: the editor's own GPU
    expect(written(withoutKept(kept, { where: '', key: 'gpu' }), { model: {}, training: {}, gpu: { name: 'h100-sxm' } }).gpu).toEqual({ name: 'h100-sxm' });
  });

  it('a second model form and a second GPU form beside the shown ones are kept and listed', () => {
    const layers = [{ type: 'linear', in_features: 4, out_features: 4 }];
    const plan = { format: 'memplan.plan', version: 1, model: { preset: 'gpt2', layers, input_features: 4 }, training: { batch_size: 8 }, gpu: { name: 'a100-80gb', memory_limit_bytes: 2 ** 34 } };
    const kept = keptOf(plan, shown('preset', 'name'));
    expect(kept.model).toEqual({ layers, input_features: 4 });
    expect(kept.gpu).toEqual({ memory_limit_bytes: 2 ** 34 });
    const fields = { model: { preset: 'gpt2' }, training: { batch_size: 8 }, gpu: { name: 'a100-80gb' } };
    expect(written(kept, fields).gpu).toEqual({ name: 'a100-80gb', memory_limit_bytes: 2 ** 34 });
    expect(keptKeys(kept, fields).map((k) => k.path).sort()).toEqual(['gpu.memory_limit_bytes', 'model.input_features', 'model.layers']);
    // The user picks the custom GPU and the layer list: the fields write those keys, even with the same values.
    const picked = { model: { layers, input_features: 4 }, training: { batch_size: 8 }, gpu: { memory_limit_bytes: 2 ** 34 } };
    expect(written(kept, picked).gpu).toEqual({ memory_limit_bytes: 2 ** 34 });
    expect(keptKeys(kept, picked)).toEqual([]);
  });

  it('each form keeps the keys of its own form (a layer list with a shape, a torchvision model with classes)', () => {
    expect(formKeys('model', 'input_shape').sort()).toEqual(['input_shape', 'layers']);
    expect(formKeys('model', 'input_features').sort()).toEqual(['input_features', 'layers']);
    expect(formKeys('model', 'torchvision').sort()).toEqual(['num_classes', 'torchvision']);
    const plan = { format: 'memplan.plan', version: 1, model: { layers: [], input_shape: [3, 32, 32], input_features: 8 }, training: { batch_size: 8 } };
    expect(keptOf(plan, shown('input_features')).model).toEqual({ input_shape: [3, 32, 32] });
  });

  it('a format or version other than memplan’s is kept; its own are not', () => {
    expect(keptOf({ format: 'memplan.plan', version: 1, model: {}, training: {} }, shown('preset'))['']).toEqual({});
    const kept = keptOf({ format: 'memplan.plan', version: 2, model: {}, training: {} }, shown('preset'));
    expect(kept['']).toEqual({ version: 2 });
    expect(written(kept, { model: {}, training: {}, gpu: {} }).version).toBe(2);
  });

  it('a key with a dot in its name is taken out by its object and key, not by splitting its path', () => {
    const plan = { format: 'memplan.plan', version: 1, 'notes.v2': 'x', model: {}, training: { batch_size: 1 } };
    const kept = keptOf(plan, shown('preset'));
    const [k] = keptKeys(kept, { model: {}, training: { batch_size: 1 }, gpu: {} });
    expect(k).toEqual({ where: '', key: 'notes.v2', path: 'notes.v2' });
    expect(withoutKept(kept, k!)['']).toEqual({});
  });

  it('LoRA keys PEFT has and memplan does not read are kept inside training.lora', () => {
    const plan = { format: 'memplan.plan', version: 1, model: { preset: 'llama-3-8b' }, training: { batch_size: 1, lora: { r: 8, alpha: 16, target_modules: ['q_proj'], use_rslora: true } } };
    const kept = keptOf(plan, shown('preset'));
    expect(kept['training.lora']).toEqual({ use_rslora: true });
    expect(kept.training).toEqual({});
    const lora = { r: 8, alpha: 16, target_modules: ['q_proj'] };
    expect(keptKeys(kept, { model: {}, training: { batch_size: 1, lora }, gpu: {} }).map((k) => k.path)).toEqual(['training.lora.use_rslora']);
    expect((written(kept, { model: {}, training: { batch_size: 1, lora }, gpu: {} }).training as { lora: object }).lora).toEqual({ ...lora, use_rslora: true });
    // LoRA turned off: its kept keys are not written, nor listed
    expect(keptKeys(kept, { model: {}, training: { batch_size: 1 }, gpu: {} })).toEqual([]);
  });
});
