/**
 * `training.lora.target_modules` in PEFT's three forms (a list of names, "all-linear", a regular expression),
 * against what PEFT 0.21 built on the GPU machine for the same plans (resources/measure/probe_lora_targets.py,
 * test/fixtures/device/h100_lora_targets.json): every model type and head memplan simulates with "all-linear",
 * and patterns on a Llama. Where PEFT built a model, memplan's parameters are PEFT's `named_parameters()`, name
 * for name, with their shapes, dtypes and requires_grad; where PEFT raised, memplan refuses at the field.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { InputError } from '../../../engine/errors.ts';
import { isLoraTarget, moduleNames, targetPattern } from '../../../engine/models/peft/lora.ts';
import { parsePlan, safeParsePlan } from '../../../engine/plan/parse.ts';
import { planModel } from '../../../engine/train/simulate.ts';
import { planGpu } from '../../../cli/gpus.ts';
import { expectSameRequestsPlacedElsewhere, recording } from './allocations.ts';

interface ProbeCase {
  name: string;
  plan: Record<string, unknown>;
  error?: string;
  resolved_target_modules?: string[] | string;
  parameters?: [string, number[], string, boolean][];
  /** named_modules() before PEFT: name, class, own parameters and buffers. */
  modules: [string, string, number][];
}
const probe = JSON.parse(readFileSync(new URL('../../fixtures/device/h100_lora_targets.json', import.meta.url), 'utf8')) as { versions: Record<string, string>; cases: ProbeCase[] };

const escapeRe = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** A PEFT parameter name as the model named it before PEFT wrapped it (memplan's names). */
const unwrapped = (name: string) => name.replace(/^base_model\.model\./, '').replace('.base_layer.', '.').replace('.original_module.', '.');

/** memplan's parameters for a plan: name -> [shape, dtype, trainable]. */
function memplanParameters(plan: Record<string, unknown>): Map<string, [number[], string, boolean]> {
  const parsed = parsePlan(plan);
  const model = planModel(parsed, planGpu(parsed));
  return new Map(model.parameters.filter((p) => !p.buffer).map((p) => [p.name, [p.shape, p.dtype, !p.frozen]]));
}

describe('the modules target_modules are matched against are named_modules() before PEFT', () => {
  const models = new Map<string, ProbeCase>();
  for (const c of probe.cases) models.set(JSON.stringify(c.plan.model), c);
  expect(models.size).toBeGreaterThanOrEqual(35);
  for (const c of models.values()) {
    it(c.name.replace(/^all_linear_/, ''), () => {
      const training = { ...(c.plan.training as Record<string, unknown>) };
      delete training.lora;
      const plan = parsePlan({ ...c.plan, training });
      expect([...moduleNames(planModel(plan, planGpu(plan)))].sort()).toEqual(c.modules.map(([name]) => name).sort());
    });
  }
});

describe('the probe ran PEFT 0.21 on transformers 5.17', () => {
  it('records its versions and the cases it built', () => {
    expect(probe.versions.peft).toBe('0.21.0');
    expect(probe.versions.transformers).toBe('5.17.0');
    expect(probe.cases.filter((c) => c.parameters).length).toBeGreaterThanOrEqual(35);
  });
});

describe('where PEFT built the model, memplan has its parameters: names, shapes, dtypes, what trains', () => {
  /** PEFT adapts what memplan does not simulate: the embedding (lora.Embedding), a mixture of experts' routers and experts. */
  const unsimulated = (name: string) => name === 'regex_llama_embed' || /^all_linear_(mixtral|qwen3_moe)_/.test(name);
  for (const c of probe.cases.filter((x) => x.parameters && !unsimulated(x.name))) {
    it(c.name, () => {
      const real = new Map(c.parameters!.map(([name, shape, dtype, trains]) => [unwrapped(name), [shape, dtype, trains]]));
      const mine = memplanParameters(c.plan);
      expect([...mine.keys()].sort()).toEqual([...real.keys()].sort());
      for (const [name, value] of real) expect(mine.get(name), name).toEqual(value);
    });
  }
});

describe('where PEFT raised, memplan refuses at training.lora.target_modules', () => {
  const refused = (name: string) => {
    const c = probe.cases.find((x) => x.name === name)!;
    expect(c.error, `PEFT raised for ${name}`).toBeTruthy();
    try {
      memplanParameters(c.plan);
    } catch (error) {
      if (error instanceof InputError) return { where: error.where, message: error.problem, peft: c.error! };
      const issues = (error as { issues?: { path: string; message: string }[] }).issues;
      if (issues) return { where: issues[0]!.path, message: issues[0]!.message, peft: c.error! };
      throw error;
    }
    throw new Error(`memplan accepted ${name}, where PEFT raised ${c.error}`);
  };

  it('"all-linear" on every token classifier: PEFT adapts the classifier, then TOKEN_CLS cannot keep it whole', () => {
    const tokenCases = probe.cases.filter((c) => c.name.startsWith('all_linear') && c.name.includes('TokenClassification'));
    expect(tokenCases.length).toBe(6);
    for (const c of tokenCases) {
      const r = refused(c.name);
      expect(r.peft).toMatch(/^TypeError: modules_to_save cannot be applied to modules of type <class 'peft\.tuners\.lora\.layer\.Linear'>/);
      expect(r.where).toBe('training.lora.target_modules');
      const head = (c.plan.model as { hf_config: { model_type: string } }).hf_config.model_type.includes('bert') ? 'classifier' : 'score';
      expect(r.message).toBe(`"all-linear" takes ${head}, the token classifier PEFT's TOKEN_CLS task also keeps whole as modules_to_save: PEFT 0.21 then raises "${r.peft}"; name the modules to adapt instead`);
    }
  });

  it('a pattern that takes only norms (PEFT supports no norm module)', () => {
    const r = refused('regex_llama_norm');
    expect(r.peft).toMatch(/^ValueError: Target module LlamaRMSNorm/);
    expect(r.message).toMatch(/^"\.\*layernorm" names model\.layers\.\d+\.(input|post_attention)_layernorm, on which memplan does not simulate an adapter/);
  });

  it('a pattern that matches no module', () => {
    const r = refused('regex_llama_none');
    expect(r.peft).toMatch(/^NoMatchingPeftModuleError/);
    expect(r.message).toBe('no nn.Linear of this model matches "nothing.*"; its nn.Linear modules are named q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, lm_head');
  });

  it('a pattern or a name that takes an activation or a dropout (modules without parameters)', () => {
    for (const [name, module] of [
      ['regex_llama_mlp_all', 'model.layers.0.mlp'],
      ['regex_gpt2_attn_all', 'transformer.h.0.attn'],
      ['list_llama_act_fn', 'model.layers.0.mlp.act_fn'],
    ] as const) {
      const r = refused(name);
      expect(r.peft).toMatch(/^ValueError: Target module (SiLUActivation|Dropout)\(.*\) is not supported/);
      const lora = (probe.cases.find((c) => c.name === name)!.plan.training as { lora: { target_modules: string | string[] } }).lora;
      const target = typeof lora.target_modules === 'string' ? lora.target_modules : 'act_fn';
      const fix = typeof lora.target_modules === 'string' ? 'change the pattern so that it does not match it' : 'leave it out of target_modules';
      expect(r.message).toMatch(new RegExp(`^${escapeRe(JSON.stringify(target))} names ${escapeRe(module)}(\\.[a-z_]+)?, on which memplan does not simulate an adapter \\(.*\\): ${fix}$`));
    }
  });

  it('"all-linear" inside a list, which PEFT reads as a module name', () => {
    const r = refused('list_all_linear_llama');
    expect(r.peft).toMatch(/^NoMatchingPeftModuleError: Target modules \{'all-linear'\} not found/);
    expect(r.where).toBe('training.lora.target_modules[0]');
    expect(r.message).toMatch(/^in a list, "all-linear" names a module of that name: for every linear layer, write the string itself/);
  });
});

describe('what memplan does not simulate, where PEFT adapts it', () => {
  it('a pattern taking the input embedding (PEFT: lora.Embedding) is refused', () => {
    const c = probe.cases.find((x) => x.name === 'regex_llama_embed')!;
    expect(c.parameters!.filter(([name]) => name.includes('lora_')).map(([name]) => unwrapped(name))).toEqual(['model.embed_tokens.lora_embedding_A.default', 'model.embed_tokens.lora_embedding_B.default']);
    expect(() => memplanParameters(c.plan)).toThrow(/^training\.lora\.target_modules: "\.\*embed_tokens" names model\.embed_tokens, on which memplan does not simulate an adapter/);
  });
});

describe('what "all-linear" resolves to', () => {
  it('on a mixture of experts, PEFT 0.21 adapts the routers and the experts\' 3-D weights, which memplan refuses to guess', () => {
    for (const name of ['all_linear_mixtral_MixtralForCausalLM_false', 'all_linear_mixtral_MixtralForSequenceClassification_false', 'all_linear_qwen3_moe_Qwen3MoeForCausalLM_false', 'all_linear_qwen3_moe_Qwen3MoeForSequenceClassification_false']) {
      const c = probe.cases.find((x) => x.name === name)!;
      const adapted = c.parameters!.filter(([n]) => n.includes('lora_A')).map(([n]) => unwrapped(n));
      expect(adapted).toContain('model.layers.0.mlp.gate.lora_A.default.weight');
      expect(adapted).toContain('model.layers.0.mlp.experts.lora_A.default.weight');
      expect(() => memplanParameters(c.plan), name).toThrow(/^training\.lora\.target_modules: "all-linear" takes the mixture of experts' routers and experts too \(model\.layers\.0\.mlp\.(gate|experts), model\.layers\.0\.mlp\.(gate|experts), \.\.\.\), which PEFT 0\.21 adapts and memplan does not: name the modules to adapt instead \(all-linear's others are named q_proj, k_proj, v_proj, o_proj\)$/);
    }
  });

  it('every linear module but the output layer (an untied lm_head stays without an adapter)', () => {
    const adapted = (name: string) => new Set(probe.cases.find((c) => c.name === name)!.parameters!.filter(([n]) => n.includes('lora_A')).map(([n]) => unwrapped(n).split('.').at(-4)!));
    expect([...adapted('all_linear_llama_LlamaForCausalLM_false')].sort()).toEqual(['down_proj', 'gate_proj', 'k_proj', 'o_proj', 'q_proj', 'up_proj', 'v_proj']);
    expect(probe.cases.find((c) => c.name === 'all_linear_llama_LlamaForCausalLM_false')!.parameters!.some(([n]) => unwrapped(n) === 'lm_head.weight')).toBe(true);
    const regexHead = probe.cases.find((c) => c.name === 'regex_llama_lm_head')!;
    expect(regexHead.parameters!.filter(([n]) => n.includes('lora_')).map(([n]) => unwrapped(n))).toEqual(['lm_head.lora_A.default.weight', 'lm_head.lora_B.default.weight']);
  });

  it('"ALL-LINEAR" is the shorthand too, and a plan with it parses', () => {
    const upper = probe.cases.find((c) => c.name === 'upper_all_linear_llama')!;
    const lower = probe.cases.find((c) => c.name === 'all_linear_llama_LlamaForCausalLM_false')!;
    expect(upper.parameters!.map((p) => p[0])).toEqual(lower.parameters!.map((p) => p[0]));
    expect(safeParsePlan(upper.plan).ok).toBe(true);
  });
});

describe('target_modules in the plan file', () => {
  const plan = (target_modules: unknown) => ({ format: 'memplan.plan', version: 1, model: { preset: 'tinyllama-1.1b' }, training: { batch_size: 1, lora: { r: 8, alpha: 16, target_modules } } });
  const issues = (target_modules: unknown) => {
    const r = safeParsePlan(plan(target_modules));
    return r.ok ? [] : r.issues.map((i) => `${i.path}: ${i.message}`);
  };

  it('takes a list, "all-linear" and a regular expression', () => {
    expect(issues(['q_proj'])).toEqual([]);
    expect(issues('all-linear')).toEqual([]);
    expect(issues('.*\\.(q|v)_proj')).toEqual([]);
  });

  it('names the field and what it takes', () => {
    expect(issues(5)).toEqual(['training.lora.target_modules: expected a list or text, got 5']);
    expect(issues([])).toEqual(['training.lora.target_modules: name at least one module']);
    expect(issues('(?P<x>q_proj)')).toEqual(['training.lora.target_modules: is not "all-linear", and not a regular expression memplan can read: "Invalid regular expression: /(?P<x>q_proj)/u: Invalid group"']);
  });

  it('matches a pattern against the whole module name, as re.fullmatch', () => {
    expect(isLoraTarget('model.layers.0.self_attn.q_proj', '.*q_proj')).toBe(true);
    expect(isLoraTarget('model.layers.0.self_attn.q_proj', 'q_proj')).toBe(false);
    expect(isLoraTarget('model.layers.0.self_attn.q_proj_x', '.*q_proj')).toBe(false);
    expect(isLoraTarget('lm_head', 'all-linear')).toBe(false); // the shorthand names no module
    expect(() => targetPattern('\\Z')).toThrow(SyntaxError);
  });

  it('refuses a repeated group that repeats inside, which backtracks for exponential time (the window would freeze)', () => {
    expect(issues('(.*)*q_proj')).toEqual(['training.lora.target_modules: is not "all-linear", and not a regular expression memplan can read: "repeats a group that repeats inside, as (.*)* does, which can take exponential time to match"']);
    for (const slow of ['(a+)+', '((ab)*c)+', '(x{2,})*', '(?:.*q)+']) expect(() => targetPattern(slow), slow).toThrow(/exponential/);
    for (const fine of ['.*\\.(q|v)_proj', 'model\\.layers\\.[0-9]+\\..*', '\\(.*\\)*', '[(]*']) expect(() => targetPattern(fine), fine).not.toThrow();
  });
});

describe('"all-linear" trained on the H100 (4-layer TinyLlama, AMP bf16, checkpointed, 6 steps)', () => {
  it('asks for the same blocks in the same order as PyTorch; both peaks exact', () => {
    const name = 'lora_tinyllama_4l_amp_bf16_all_linear_ckpt_s512';
    const m = recording(name);
    expect((m.plan as { training: { lora: { target_modules: unknown } } }).training.lora.target_modules).toBe('all-linear');
    const r = expectSameRequestsPlacedElsewhere(name);
    expect(r.peak_allocated_bytes).toBe(m.peak_allocated_bytes);
    expect(r.peak_reserved_bytes).toBe(m.peak_reserved_bytes);
  });
});
