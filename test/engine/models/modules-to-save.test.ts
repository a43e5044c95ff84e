/**
 * `training.lora.modules_to_save` against what PEFT 0.21 built on the GPU machine for the same plans
 * (resources/measure/probe_lora_targets.py, test/fixtures/device/h100_modules_to_save.json): embeddings and output
 * layers, tied and untied, norms by a name every norm ends with, a module target_modules also name, a name that
 * matches nothing, classifiers, GPT-2 and the BERT family. Where PEFT built a model and memplan simulates it,
 * memplan's parameters are PEFT's `named_parameters()`, name for name, with their shapes, dtypes and requires_grad;
 * what memplan does not simulate is refused at the field. Four H100 recordings with copies are exact event for event
 * (test/engine/train/calibration.test.ts).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { InputError } from '../../../engine/errors.ts';
import { parsePlan } from '../../../engine/plan/parse.ts';
import { planModel, simulate } from '../../../engine/train/simulate.ts';
import { forgetRecordedRuns } from '../../../engine/train/run-replay.ts';
import { planGpu } from '../../../cli/gpus.ts';

interface ProbeCase {
  name: string;
  plan: { model: unknown; training: Record<string, unknown> & { lora: Record<string, unknown> } };
  error?: string;
  modules_to_save?: string[];
  parameters?: [string, number[], string, boolean][];
}
const probe = JSON.parse(readFileSync(new URL('../../fixtures/device/h100_modules_to_save.json', import.meta.url), 'utf8')) as { versions: Record<string, string>; cases: ProbeCase[] };
const byName = (name: string) => probe.cases.find((c) => c.name === name)!;

/** A PEFT parameter name as the model named it before PEFT wrapped it (memplan's names; copies keep theirs). */
const unwrapped = (name: string) => name.replace(/^base_model\.model\./, '').replace('.base_layer.', '.').replace('.original_module.', '.');

function memplanParameters(plan: unknown) {
  const parsed = parsePlan(plan);
  return planModel(parsed, planGpu(parsed)).parameters.filter((p) => !p.buffer);
}

/** The field and message memplan refuses a plan with. */
function refusal(plan: unknown): { where: string; message: string } {
  try {
    memplanParameters(plan);
  } catch (error) {
    if (error instanceof InputError) return { where: error.where, message: error.problem };
    throw error;
  }
  throw new Error('memplan accepted the plan');
}

const withSaved = (c: ProbeCase, lora: Record<string, unknown>) => ({ ...c.plan, training: { ...c.plan.training, lora: { ...c.plan.training.lora, ...lora } } });

/** What memplan refuses of what PEFT built, and why (checked below). */
const REFUSED = ['mts_llama_untied_layer0', 'mts_roberta_mlm_lm_head', 'mts_bert_mlm_words', 'mts_bert_mlm_decoder', 'mts_xlmr_mlm_words'];

describe('the probe ran PEFT 0.21 on transformers 5.17', () => {
  it('records its versions, and PEFT built every case', () => {
    expect(probe.versions.peft).toBe('0.21.0');
    expect(probe.versions.transformers).toBe('5.17.0');
    expect(probe.cases.length).toBe(27);
    expect(probe.cases.filter((c) => c.error)).toEqual([]);
  });
});

describe('where PEFT built the model, memplan has its parameters: the copies, and the originals frozen', () => {
  for (const c of probe.cases.filter((x) => !REFUSED.includes(x.name))) {
    it(c.name, () => {
      const real = new Map(c.parameters!.map(([name, shape, dtype, trains]) => [unwrapped(name), [shape, dtype, trains]]));
      const mine = new Map(memplanParameters(c.plan).map((p) => [p.name, [p.shape, p.dtype, !p.frozen]]));
      expect([...mine.keys()].sort()).toEqual([...real.keys()].sort());
      for (const [name, value] of real) expect(mine.get(name), name).toEqual(value);
    });
  }

  it('PEFT matches a plain suffix: "norm" takes every norm, each layer\'s input_layernorm too', () => {
    const copies = memplanParameters(byName('mts_llama_untied_norm').plan).filter((p) => p.savedModule === 'modules_to_save');
    expect(copies.map((p) => p.name)).toEqual([
      ...[0, 1, 2, 3].flatMap((i) => [`model.layers.${i}.input_layernorm.modules_to_save.default.weight`, `model.layers.${i}.post_attention_layernorm.modules_to_save.default.weight`]),
      'model.norm.modules_to_save.default.weight',
    ]);
  });

  it('a tied embedding and lm_head get a copy each, moved where Module._apply visits them (lm_head last)', () => {
    const params = memplanParameters(byName('mts_llama_tied_embed_head').plan);
    const names = params.map((p) => p.name);
    expect(names.slice(0, 2)).toEqual(['model.embed_tokens.weight', 'model.embed_tokens.modules_to_save.default.weight']);
    expect(names.at(-1)).toBe('lm_head.modules_to_save.default.weight');
    expect(params.find((p) => p.name === 'model.embed_tokens.weight')!.frozen).toBe(true);
  });

  it('a module target_modules name too gets no adapter: the copy trains whole', () => {
    const params = memplanParameters(byName('mts_llama_untied_overlap_q').plan);
    const adapters = params.filter((p) => p.adapter).map((p) => p.name);
    expect(adapters.length).toBe(8);
    expect(adapters.every((name) => name.includes('.self_attn.v_proj.lora_'))).toBe(true);
    expect(params.filter((p) => p.savedModule).map((p) => p.name)).toEqual([0, 1, 2, 3].map((i) => `model.layers.${i}.self_attn.q_proj.modules_to_save.default.weight`));
  });
});

describe('what memplan refuses at training.lora.modules_to_save', () => {
  it('a module with submodules (a decoder layer, RoBERTa\'s LM head): memplan copies modules whose parameters are their own', () => {
    expect(refusal(byName('mts_llama_untied_layer0').plan)).toEqual({
      where: 'training.lora.modules_to_save',
      message: '"layers.0" takes model.layers.0, a module with submodules: memplan simulates modules_to_save on modules whose parameters are their own (an embedding, a norm, a linear layer, lm_head); name those',
    });
    expect(refusal(byName('mts_roberta_mlm_lm_head').plan).message).toMatch(/^"lm_head" takes lm_head, a module with submodules/);
  });

  it('a masked LM, whose decoder shares the word embedding (its copies are not simulated)', () => {
    for (const name of ['mts_bert_mlm_words', 'mts_bert_mlm_decoder', 'mts_xlmr_mlm_words']) {
      const r = refusal(byName(name).plan);
      expect(r.where).toBe('training.lora.modules_to_save');
      expect(r.message).toMatch(/but this model's (cls\.predictions\.decoder|roberta\.embeddings\.word_embeddings) shares its weight with another module, which memplan does not copy for modules_to_save/);
    }
  });

  it('a name whose suffix takes a module LoRA adapts: PEFT raises a TypeError (peft/utils/other.py check_module)', () => {
    // "proj" is no whole part of q_proj, so check_target_module_exists does not exclude it, and _set_trainable's
    // suffix match then finds a lora.Linear
    expect(refusal(withSaved(byName('mts_llama_untied_head'), { modules_to_save: ['proj'] }))).toEqual({
      where: 'training.lora.modules_to_save',
      message: `"proj" takes model.layers.0.self_attn.q_proj (its name ends with it), which target_modules adapt: PEFT 0.21 raises "TypeError: modules_to_save cannot be applied to modules of type <class 'peft.tuners.lora.layer.Linear'>"; name the module whole (its name, or its last dot-separated parts)`,
    });
  });

  it('targets that modules_to_save all keep whole: PEFT adapts nothing and raises', () => {
    expect(refusal(withSaved(byName('mts_llama_untied_head'), { target_modules: ['lm_head'], modules_to_save: ['lm_head'] }))).toEqual({
      where: 'training.lora.target_modules',
      message: 'every module target_modules name is kept whole by modules_to_save, and gets no adapter: PEFT 0.21 raises "No modules were targeted for adaptation"; name other modules to adapt',
    });
  });
});

describe('simulated', () => {
  const small = (c: ProbeCase, lora: Record<string, unknown> = {}) => parsePlan({ ...withSaved(c, lora), training: { ...withSaved(c, lora).training, batch_size: 2, seq_len: 128 } });

  it('a name that matches no module copies nothing, and the answer says so (PEFT does not)', () => {
    const plan = small(byName('mts_llama_untied_nothing'));
    const r = simulate(plan, { device: planGpu(plan), timelinePoints: 0 });
    expect(r.notes).toContainEqual({ id: 'lora_modules_to_save_unmatched', modules: ['nothing'] });
    const none = small(byName('mts_llama_untied_nothing'), { modules_to_save: [] });
    expect(r.peak_allocated_bytes).toBe(simulate(none, { device: planGpu(none), timelinePoints: 0 }).peak_allocated_bytes);
  });

  it('each copy is a weight that trains, with AdamW\'s two moments: an untied head and embedding, at least 3 x 2 x V x H bf16 bytes more at the peak', () => {
    const both = small(byName('mts_llama_untied_embed_head'));
    const none = small(byName('mts_llama_untied_embed_head'), { modules_to_save: [] });
    const r = simulate(both, { device: planGpu(both), timelinePoints: 0 });
    const base = simulate(none, { device: planGpu(none), timelinePoints: 0 });
    expect(r.model.trainable_parameter_count! - base.model.trainable_parameter_count!).toBe(2 * 32000 * 256);
    expect(r.model.parameter_bytes - base.model.parameter_bytes).toBe(2 * 32000 * 256 * 2);
    // the copies and AdamW's two moments of each, in the copies' bf16, live from the first step on (their gradients
    // come and go within a step)
    expect(r.peak_allocated_bytes - base.peak_allocated_bytes).toBeGreaterThanOrEqual(3 * 2 * 32000 * 256 * 2);
  });

  it('copies inside the repeated layers (every norm) simulate the same with and without reused blocks', () => {
    const plan = small(byName('mts_llama_untied_norm'));
    const options = { device: planGpu(plan), timelinePoints: 2 ** 31, neededOnOom: false } as const;
    const full = simulate(plan, { ...options, reuseBlocks: false });
    forgetRecordedRuns();
    expect(simulate(plan, { ...options, reuseBlocks: true })).toEqual(full);
  });
});
