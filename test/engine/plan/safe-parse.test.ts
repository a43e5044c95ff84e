/** Errors as values: every problem of a plan, each at its field path, in words that say what was given and what is accepted. */
import { describe, expect, it } from 'vitest';
import catalogJson from '../../../resources/gpus.json' with { type: 'json' };
import { InputError, InputIssuesError, parseGpuCatalog, parsePlan, safeParseHfConfig, safeParsePlan } from '../../../engine/index.ts';

const catalog = parseGpuCatalog(catalogJson);
const base = { format: 'memplan.plan', version: 1, model: { input_features: 8, layers: [{ type: 'linear', in_features: 8, out_features: 4 }] }, training: { batch_size: 8 } };
const issues = (value: unknown) => {
  const r = safeParsePlan(value, { catalog });
  if (r.ok) throw new Error('expected issues');
  return Object.fromEntries(r.issues.map((i) => [i.path, i.message]));
};

describe('safeParsePlan', () => {
  it('accepts a valid plan and fills its defaults', () => {
    const r = safeParsePlan(base);
    expect(r.ok).toBe(true);
    if (r.ok) expect(r.plan.training.precision).toBe('fp32');
  });

  it('lists every problem at once, each at its path (issue 13 wording)', () => {
    const found = issues({
      ...base,
      model: { input_features: 8, layers: [{ type: 'linear', in_features: 8, out_features: 4 }, { type: 'lstm' }, { type: 'linear', in_features: 'x', out_features: 2 }] },
      training: { batch_size: '8', batchsize: 3, precision: 'fp8', steps: 1.5 },
      gpu: { memory_limit_bytes: '80GB' },
    });
    expect(found['training.batch_size']).toBe('expected a number, got "8" (text)');
    expect(found['training.steps']).toBe('must be a whole number, got 1.5');
    expect(found['training.batchsize']).toBe('unknown key "batchsize"; did you mean "batch_size"?');
    expect(found['training.precision']).toMatch(/expected one of "fp32", .*; got "fp8"/);
    expect(found['gpu.memory_limit_bytes']).toBe('expected a number, got "80GB" (text)');
    expect(found['model.layers[1].type']).toMatch(/unknown layer type "lstm"; accepted: linear, conv2d, .*repeat/);
    expect(found['model.layers[2].in_features']).toBe('expected a number, got "x" (text)');
    expect(found['gpu.name']).toBeUndefined(); // not "gpu.name: is required"
  });

  it('blames the field of the model form the user meant', () => {
    expect(issues({ ...base, model: { torchvision: 'efficientnet_b0' } })).toEqual({ 'model.torchvision': expect.stringMatching(/expected one of "resnet18", .*; got "efficientnet_b0"/) });
    expect(issues({ ...base, model: { preset: 'gpt-2' } })['model.preset']).toContain('did you mean "gpt2"?');
    // two forms at once: said as such, not "unknown key" beside a list that names it
    expect(issues({ ...base, model: { preset: 'gpt2', hf_config: { model_type: 'llama' } } })).toEqual({ 'model.hf_config': '"hf_config" cannot be given with "preset": give one of them' });
    // an optional key of another form is named with the key it conflicts with, not with every key given
    expect(issues({ ...base, model: { preset: 'gpt2', num_classes: 3, hf_config: { model_type: 'llama' } } })).toEqual({ 'model.hf_config': '"hf_config" cannot be given with "preset": give one of them' });
    expect(issues({ ...base, model: { hf_config: { model_type: 'llama' }, num_classes: 10 } })).toEqual({ 'model.num_classes': '"num_classes" cannot be given with "hf_config": give one of them' });
    expect(issues({ ...base, model: { layers: [{ type: 'relu' }], input_features: 8, input_shape: [8] } })['model.input_shape']).toBe('"input_shape" cannot be given with "input_features": give one of them');
  });

  it('names every value a field of plain values accepts (a union of true/false and names is one list)', () => {
    const accepted = 'expected one of true, false, "non_reentrant", "reentrant"';
    expect(issues({ ...base, training: { batch_size: 8, activation_checkpointing: { enabled: true } } })).toEqual({ 'training.activation_checkpointing': `${accepted}; got an object` });
    expect(issues({ ...base, training: { batch_size: 8, activation_checkpointing: 'reentrnat' } })).toEqual({ 'training.activation_checkpointing': `${accepted}; got "reentrnat" (text); did you mean "reentrant"?` });
    expect(issues({ ...base, training: { batch_size: 8, activation_checkpointing: 1 } })).toEqual({ 'training.activation_checkpointing': `${accepted}; got 1` });
    // a union of objects is told by its best member, not as a list of one
    expect(issues({ ...base, model: 'gpt2' })).toEqual({ model: 'expected an object, got "gpt2" (text)' });
  });

  it('checks a pasted config.json, the allocator settings and the GPU name', () => {
    expect(issues({ ...base, model: { hf_config: { model_type: 'gpt2', n_embd: -1 } } })).toEqual({ 'model.hf_config.n_embd': 'must be a positive integer, got -1' });
    expect(Object.keys(issues({ ...base, allocator: { conf: 'bogus_option:1' } }))).toEqual(['allocator.conf']);
    expect(issues({ ...base, gpu: { name: 'h100-sxn' } })['gpu.name']).toContain('did you mean "h100-sxm"');
  });

  it('says what to do with a bare config.json given as a plan', () => {
    expect(issues({ model_type: 'llama', hidden_size: 4096 })['']).toContain('model.hf_config');
  });

  it('reports a pasted config.json on its own the same way', () => {
    const r = safeParseHfConfig({ model_type: 't5' });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.issues).toEqual([{ path: 'model.hf_config.model_type', message: expect.stringContaining('"t5" is not simulated yet') }]);
    expect(safeParseHfConfig({ model_type: 'gpt2' }).ok).toBe(true);
  });

  it('issues are plain objects that survive structuredClone; parsePlan throws them all as one InputError', () => {
    const r = safeParsePlan({ ...base, training: { batch_size: 0, precision: 'x' } });
    expect(structuredClone(r)).toEqual(r);
    expect(() => parsePlan({ ...base, training: { batch_size: 0, precision: 'x' } })).toThrow(InputIssuesError);
    try {
      parsePlan({ ...base, training: { batch_size: 0, precision: 'x' } });
    } catch (error) {
      expect(error).toBeInstanceOf(InputError);
      expect((error as InputIssuesError).issues).toHaveLength(2);
      expect((error as Error).message.split('\n')).toHaveLength(2);
    }
  });
});
