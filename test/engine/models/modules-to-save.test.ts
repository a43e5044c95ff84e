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
import { blockReuseCounts } from '../../../engine/models/block-reuse.ts';
import { excludedFromLora, isSavedModule } from '../../../engine/models/peft/lora.ts';
import { parsePlan, safeParsePlan } from '../../../engine/plan/parse.ts';
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

function memplanModel(plan: unknown) {
  const parsed = parsePlan(plan);
  return planModel(parsed, planGpu(parsed));
}
const memplanParameters = (plan: unknown) => memplanModel(plan).parameters.filter((p) => !p.buffer);

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
const REFUSED = ['mts_llama_untied_layer0', 'mts_roberta_mlm_lm_head', 'mts_bert_mlm_decoder', 'mts_xlmr_mlm_words'];

describe('the probe ran PEFT 0.21 on transformers 5.17', () => {
  it('records its versions, and PEFT built every case', () => {
    expect(probe.versions.peft).toBe('0.21.0');
    expect(probe.versions.transformers).toBe('5.17.0');
    expect(probe.cases.length).toBe(34);
    expect(probe.cases.filter((c) => c.plan.training.lora.ensure_weight_tying).length).toBe(7);
    expect(probe.cases.filter((c) => c.error)).toEqual([]);
  });
});

describe('where PEFT built the model, memplan has its parameters: the copies, and the originals frozen', () => {
  for (const c of probe.cases.filter((x) => !REFUSED.includes(x.name))) {
    it(c.name, () => {
      const real = new Map(c.parameters!.map(([name, shape, dtype, trains]) => [unwrapped(name), [shape, dtype, trains]]));
      const model = memplanModel(c.plan);
      const mine = new Map(model.parameters.filter((p) => !p.buffer).map((p) => [p.name, [p.shape, p.dtype, !p.frozen]]));
      expect([...mine.keys()].sort()).toEqual([...real.keys()].sort());
      for (const [name, value] of real) expect(mine.get(name), name).toEqual(value);
      // and in named_parameters() order: the optimizer's (the original, then its copy)
      expect(model.optimizerOrder ?? [...mine.keys()]).toEqual([...real.keys()]);
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

  it('ensure_weight_tying: one copy of the tied embedding, which lm_head runs too; nothing tied, nothing changes', () => {
    for (const name of ['tie_llama_tied_embed_head', 'tie_llama_tied_head', 'tie_llama_tied_embed', 'tie_gemma2_embed_head']) {
      const copies = memplanParameters(byName(name).plan).filter((p) => p.savedModule);
      expect(copies.map((p) => [p.name, p.runsAs]), name).toEqual([['model.embed_tokens.modules_to_save.default.weight', ['model.embed_tokens.weight', 'lm_head.weight']]]);
    }
    expect(memplanParameters(byName('tie_gpt2_head').plan).filter((p) => p.savedModule).map((p) => p.runsAs)).toEqual([['transformer.wte.weight', 'lm_head.weight']]);
    // "wte" is not one of PEFT's embedding layer names: PEFT ties nothing (it warns), wte's copy runs in wte alone
    expect(memplanParameters(byName('tie_gpt2_wte').plan).filter((p) => p.savedModule).map((p) => p.runsAs)).toEqual([['transformer.wte.weight']]);
    expect(memplanParameters(byName('tie_llama_untied_embed_head').plan).filter((p) => p.savedModule).map((p) => p.runsAs)).toEqual([['model.embed_tokens.weight'], ['lm_head.weight']]);
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

  it("a masked LM's decoder (its bias is the head's), and XLM-RoBERTa's word embedding (listed as the decoder's weight)", () => {
    expect(refusal(byName('mts_bert_mlm_decoder').plan)).toEqual({
      where: 'training.lora.modules_to_save',
      message: '"decoder" takes cls.predictions.decoder, whose weight or bias is another module\'s (tied, as a masked LM\'s decoder and word embedding are), which memplan does not copy for modules_to_save; leave it out',
    });
    expect(refusal(byName('mts_xlmr_mlm_words').plan).message).toMatch(/^"word_embeddings" takes roberta\.embeddings\.word_embeddings, whose weight or bias is another module's/);
  });

  it("a part of a LoRA layer (named_modules() after the adapters are in), a module inside a head its task keeps whole", () => {
    expect(refusal(withSaved(byName('mts_llama_untied_head'), { modules_to_save: ['dropout'] })).message).toBe(
      '"dropout" takes model.layers.0.self_attn.q_proj.lora_dropout (its name ends with it), a part of the LoRA layer PEFT made of model.layers.0.self_attn.q_proj (its base_layer, lora_A, lora_B or lora_dropout), which modules_to_save cannot keep whole; name another module',
    );
    // RoBERTa's sequence classifier: "out_proj" is inside `classifier`, which SEQ_CLS keeps whole
    const roberta = { model_type: 'roberta', architectures: ['RobertaForSequenceClassification'], hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, intermediate_size: 128, vocab_size: 1000, max_position_embeddings: 130 };
    const plan = { format: 'memplan.plan', version: 1, model: { hf_config: roberta }, training: { batch_size: 2, seq_len: 64, lora: { r: 8, alpha: 16, target_modules: ['query', 'value'], modules_to_save: ['out_proj'] } } };
    expect(refusal(plan).message).toBe(`"out_proj" takes classifier.out_proj, inside classifier, which PEFT's SEQ_CLS task keeps whole already; leave it out`);
  });

  it('a name PEFT could not read as part of its pattern, or one that backtracks, at the name', () => {
    const issues = (names: string[]) => {
      const r = safeParsePlan(withSaved(byName('mts_llama_untied_head'), { modules_to_save: names }));
      return r.ok ? [] : r.issues.map((i) => i.path);
    };
    expect(issues(['lm_head', 'norm('])).toEqual(['training.lora.modules_to_save[1]']);
    expect(issues(['(.*)*head'])).toEqual(['training.lora.modules_to_save[0]']);
    // a lone brace is itself, in Python as here
    expect(issues(['lm_head{'])).toEqual([]);
  });

  it('a name whose suffix takes a module LoRA adapts: PEFT raises a TypeError (peft/utils/other.py check_module)', () => {
    // "proj" is no whole part of q_proj, so check_target_module_exists does not exclude it, and _set_trainable's
    // suffix match then finds a lora.Linear
    expect(refusal(withSaved(byName('mts_llama_untied_head'), { modules_to_save: ['proj'] }))).toEqual({
      where: 'training.lora.modules_to_save',
      message: `"proj" takes model.layers.0.self_attn.q_proj (its name ends with it), which target_modules adapt: PEFT 0.21 raises "TypeError: modules_to_save cannot be applied to modules of type <class 'peft.tuners.lora.layer.Linear'>"; name the module whole (its name, or its last dot-separated parts)`,
    });
  });

  it("a token classifier's head named by modules_to_save is kept whole from the start: \"all-linear\" no longer takes it", () => {
    const c = byName('mts_qwen3_tok_embed');
    expect(() => memplanParameters(withSaved(c, { target_modules: 'all-linear' }))).toThrow(/TOKEN_CLS task also keeps whole/);
    const params = memplanParameters(withSaved(c, { target_modules: 'all-linear', modules_to_save: ['score'] }));
    expect(params.some((p) => p.name.startsWith('score.') && p.adapter)).toBe(false);
    expect(params.filter((p) => p.savedModule).map((p) => p.name)).toEqual(['score.modules_to_save.default.weight', 'score.modules_to_save.default.bias']);
  });

  it('targets that modules_to_save all keep whole: PEFT adapts nothing and raises', () => {
    expect(refusal(withSaved(byName('mts_llama_untied_head'), { target_modules: ['lm_head'], modules_to_save: ['lm_head'] }))).toEqual({
      where: 'training.lora.target_modules',
      message: 'every module target_modules name is kept whole by modules_to_save, and gets no adapter: PEFT 0.21 raises "No modules were targeted for adaptation"; name other modules to adapt',
    });
  });
});

describe("PEFT's two matching rules, as memplan applies them", () => {
  it('_set_trainable: a plain suffix', () => {
    expect(isSavedModule('model.layers.0.input_layernorm', ['norm'])).toBe(true);
    expect(isSavedModule('model.embed_tokens', ['tokens'])).toBe(true);
    expect(isSavedModule('model.embed_tokens', ['embed'])).toBe(false);
  });

  it('check_target_module_exists: the name ends a dot-separated part, read as a pattern, and takes the modules inside too', () => {
    expect(excludedFromLora('model.layers.0.self_attn.q_proj', ['q_proj'])).toBe(true);
    expect(excludedFromLora('model.layers.0.self_attn.q_proj', ['proj'])).toBe(false);
    expect(excludedFromLora('model.layers.0.self_attn.q_proj', ['self_attn'])).toBe(true);
    expect(excludedFromLora('model.layers.0.self_attn.q_proj', ['layers.0'])).toBe(true);
    expect(excludedFromLora('model.layers.10.self_attn.q_proj', ['layers.1'])).toBe(false);
    // a dot matches any character, as in Python's re
    expect(excludedFromLora('lm_head', ['lm.head'])).toBe(true);
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

  it('ensure_weight_tying on a tied Llama: one V x H bf16 copy fewer, with its gradient and AdamW state', () => {
    const c = byName('tie_llama_tied_embed_head');
    const tiedPlan = small(c);
    const twoPlan = small(c, { ensure_weight_tying: false });
    const tied = simulate(tiedPlan, { device: planGpu(tiedPlan), timelinePoints: 0 });
    const two = simulate(twoPlan, { device: planGpu(twoPlan), timelinePoints: 0 });
    expect(two.model.trainable_parameter_count! - tied.model.trainable_parameter_count!).toBe(128256 * 256);
    expect(two.peak_allocated_bytes - tied.peak_allocated_bytes).toBeGreaterThanOrEqual(3 * 128256 * 256 * 2);
  });

  it('copies inside the repeated layers (every norm) simulate the same with and without reused blocks', () => {
    const c = byName('mts_llama_untied_norm');
    const hf = (c.plan.model as { hf_config: Record<string, unknown> }).hf_config;
    for (const checkpointing of [false, 'non_reentrant', 'reentrant']) {
      const plan = parsePlan({ ...c.plan, model: { hf_config: { ...hf, num_hidden_layers: 10 } }, training: { ...c.plan.training, batch_size: 2, seq_len: 128, activation_checkpointing: checkpointing } });
      const options = { device: planGpu(plan), timelinePoints: 2 ** 31, neededOnOom: false } as const;
      const full = simulate(plan, { ...options, reuseBlocks: false });
      forgetRecordedRuns();
      const replayed = blockReuseCounts.replayedForwards;
      expect(simulate(plan, { ...options, reuseBlocks: true })).toEqual(full);
      expect(blockReuseCounts.replayedForwards).toBeGreaterThan(replayed);
    }
  });
});
