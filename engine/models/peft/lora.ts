/**
 * LoRA as PEFT 0.21 runs it (`peft.get_peft_model(model, LoraConfig(r, lora_alpha, lora_dropout, target_modules))`,
 * peft/tuners/lora/layer.py `Linear`), and frozen parameters (`training.freeze`), for memory:
 * - Every `nn.Linear` whose name matches a target becomes a `lora.Linear`: its children are the base layer, then
 *   `lora_dropout.default` (nn.Dropout, or nn.Identity when the dropout is 0), `lora_A.default` ([r, in], no bias)
 *   and `lora_B.default` ([out, r]); `model.to("cuda")` therefore moves base weight, base bias, lora_A, lora_B.
 * - The adapters are made in the base layer's dtype (`_move_adapter_to_device_of_base_layer`), then
 *   `PeftModel.__init__` upcasts bf16/fp16 adapters to fp32 (`cast_adapter_dtype`, autocast_adapter_dtype=True):
 *   adapters are fp32 whatever the precision.
 * - Every other parameter stops requiring grad (`_mark_only_adapters_as_trainable`, bias="none"): no gradient, no
 *   optimizer state. A frozen fp32 weight under autocast is cast anew at every use (`cached_cast` caches only
 *   leaves that require grad), and the cast is what the GEMM's backward saves when its input needs a gradient.
 * - `Linear.forward`: `result = base_layer(x)`; `x = x.to(lora_A.weight.dtype)` when it differs
 *   (`_cast_input_dtype`); `result = result + lora_B(lora_A(dropout(x))) * scaling`; `result.to(result's dtype)`.
 *   Each temporary dies once the next call consumed it; the cast x dies when forward returns.
 * - With gradient checkpointing on, `PeftModel.__init__` calls `enable_input_require_grads()`: the input
 *   embedding's output is made a leaf that requires grad (the models handle that, see `inputsRequireGrad`).
 */
import { Parameter } from '../../autograd/engine.ts';
import { InputError } from '../../errors.ts';
import { addTensors, mulScalar, toDType } from '../../ops/elementwise.ts';
import { linear } from '../../ops/linear.ts';
import { dropout } from '../../ops/pointwise.ts';
import { doraForward } from './dora.ts';
import type { Runtime } from '../../ops/runtime.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type { ParameterSpec, TrainableModel } from '../model.ts';
import { HF_MODEL_TYPES } from '../hf/config.ts';

export interface LoraSpec {
  r: number;
  alpha: number;
  dropout: number;
  target_modules: TargetModules;
  /** PEFT's `modules_to_save`: modules trained whole, as a copy (`withModulesToSave`); none when left out. */
  modules_to_save?: readonly string[];
  /** PEFT's `ensure_weight_tying`: a tied embedding and output layer share one copy (`withModulesToSave`). */
  ensure_weight_tying?: boolean;
  /** PEFT's `use_dora`: each adapter a DoRA layer (models/peft/dora.ts). */
  use_dora?: boolean;
}

/**
 * `LoraConfig.target_modules` as PEFT 0.21 takes it (peft/tuners/tuners_utils.py `check_target_module_exists`,
 * `_maybe_include_all_linear_layers`): a list of names, each a module's full name or its last dot-separated parts;
 * or one string: "all-linear" in any case (`INCLUDE_LINEAR_LAYERS_SHORTHAND`), else a regular expression a
 * module's whole name must match (`re.fullmatch`). A list holding "all-linear" names a module of that name.
 */
export type TargetModules = readonly string[] | string;

/** PEFT's shorthand for every nn.Linear and Conv1D but the output layer. */
export const ALL_LINEAR = 'all-linear';

/** Whether target_modules is PEFT's "all-linear" shorthand (a string, compared in lower case). */
export function isAllLinear(targets: TargetModules): boolean {
  return typeof targets === 'string' && targets.toLowerCase() === ALL_LINEAR;
}

/**
 * A string target_modules other than "all-linear", as the regular expression `re.fullmatch` applies. Read as
 * JavaScript reads it, with the `u` flag so that what JavaScript does not know (Python's `(?P<name>...)`, an
 * escape such as `\Z`) is an error rather than another pattern: throws a SyntaxError saying what.
 */
export function targetPattern(source: string): RegExp {
  new RegExp(source, 'u'); // what is wrong, said of the expression as written
  // JavaScript's regular expressions backtrack, as Python's do: a repeated group that repeats inside, `(.*)*`,
  // can take exponential time on a module name, and the window would freeze
  if (nestsRepetition(source)) throw new SyntaxError(`repeats a group that repeats inside, as (.*)* does, which can take exponential time to match`);
  return new RegExp(`^(?:${source})$`, 'u');
}

/** Whether a group that holds `*`, `+` or `{...}` is itself followed by one of them (escapes and classes skipped). */
function nestsRepetition(source: string): boolean {
  const repeats: boolean[] = [false]; // per open group: whether it holds a repetition
  const isRepetition = (c: string | undefined) => c === '*' || c === '+' || c === '{';
  for (let i = 0; i < source.length; i++) {
    const c = source[i]!;
    if (c === '\\') i++;
    else if (c === '[') {
      for (i++; i < source.length && source[i] !== ']'; i++) if (source[i] === '\\') i++;
    } else if (c === '(') repeats.push(false);
    else if (c === ')') {
      const inner = repeats.length > 1 ? repeats.pop()! : false;
      const repeated = isRepetition(source[i + 1]);
      if (inner && repeated) return true;
      repeats[repeats.length - 1] ||= inner || repeated;
    } else if (isRepetition(c)) repeats[repeats.length - 1] = true;
  }
  return false;
}

/** The regular expressions of string target_modules, compiled once each. */
const patterns = new Map<string, RegExp>();
function patternOf(source: string): RegExp {
  let re = patterns.get(source);
  if (!re) patterns.set(source, (re = targetPattern(source)));
  return re;
}

/** What target_modules are matched against: the model's parameters and the modules named beside them. */
export type ModuleTree = Pick<TrainableModel, 'parameters' | 'tiedModules' | 'tiedWeights' | 'uncopiedModules' | 'inputEmbeddings' | 'parameterlessModules' | 'optimizerOrder'>;

/** What the plan asks to train: LoRA adapters, or the model with some parameters frozen (name patterns). */
export interface FineTuning {
  lora: LoraSpec | null;
  freeze: readonly string[];
}

export const FULL_FINE_TUNING: FineTuning = { lora: null, freeze: [] };

/**
 * The `model_type`s memplan simulates LoRA on: every Hugging Face one, each with default targets
 * (`peftDefaultTargets`: PEFT's, and where PEFT has none, q_proj and v_proj; for phi3, its fused qkv_proj).
 */
export const LORA_MODEL_TYPES: readonly string[] = HF_MODEL_TYPES;

/**
 * `LoraConfig()`'s defaults (peft/tuners/lora/config.py: r 8, lora_alpha 8, lora_dropout 0.0) and the modules it
 * targets when none are named (peft/utils/constants.py, TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING: c_attn
 * for gpt2, query and value for bert, roberta and xlm-roberta, q_proj and v_proj for llama, mistral, mixtral, qwen2, qwen3, gemma2, gemma3_text; read from PEFT 0.21 on
 * the GPU machine). PEFT 0.21 has no default for phi3, whose q, k and v are one fused `qkv_proj` (that module, the
 * attention input the others' defaults adapt), nor for qwen3_moe, smollm3 and olmo2 (q_proj and v_proj here, as
 * for qwen3 and llama). null: no default here.
 */
export const PEFT_LORA_DEFAULTS = { r: 8, alpha: 8, dropout: 0 } as const;
export function peftDefaultTargets(modelType: string): string[] | null {
  if (modelType === 'phi3') return ['qkv_proj'];
  if (modelType === 'gpt2') return ['c_attn'];
  if (modelType === 'bert' || modelType === 'roberta' || modelType === 'xlm-roberta') return ['query', 'value'];
  if (LORA_MODEL_TYPES.includes(modelType)) return ['q_proj', 'v_proj'];
  return null;
}

/** The `LoraConfig(...)` a LoRA advice stands for, as Python (PEFT's keywords; `task_type` when the head needs one). */
export function loraConfigCode(a: { r: number; alpha: number; target_modules: readonly string[]; task_type: string | null }): string {
  const targets = a.target_modules.map((t) => `"${t}"`).join(', ');
  return `LoraConfig(r=${a.r}, lora_alpha=${a.alpha}, target_modules=[${targets}]${a.task_type ? `, task_type="${a.task_type}"` : ''})`;
}

/**
 * The target names that no module of the model matches while others do (PEFT raises only when none matches, so
 * a typo among several names adapts fewer modules without a word): the names, in the plan's order. A name that
 * matches a module without an adapter is refused before (`applyFineTuning`), or names a head kept whole.
 */
export function unmatchedTargets(model: ModuleTree, targets: TargetModules): string[] {
  // one pattern: matching nothing, it adapts nothing, and that is refused (`applyFineTuning`)
  if (typeof targets === 'string') return [];
  const modules = [...moduleNames(model)];
  return targets.filter((t) => !modules.some((path) => isLoraTarget(path, [t])));
}

/**
 * PEFT's `check_target_module_exists` for target names or a regular expression: with a list, a module is a target
 * when its full name is one of them or ends with `.` + one of them; with a string, when the expression matches its
 * whole name. "all-linear" names no module by name (`adapts` decides it for the modules LoRA can wrap).
 */
export function isLoraTarget(modulePath: string, targets: TargetModules): boolean {
  if (typeof targets !== 'string') return targets.some((t) => modulePath === t || modulePath.endsWith(`.${t}`));
  return !isAllLinear(targets) && patternOf(targets).test(modulePath);
}

/**
 * Whether PEFT puts an adapter on the nn.Linear or Conv1D module at `path`: the ones target_modules match, or with
 * "all-linear" every one but the model's output embeddings (`get_output_embeddings()`: a causal LM's untied
 * `lm_head`; a tied head is no module of its own here, and a masked LM's decoder is no module LoRA adapts here).
 * A classifier head a task keeps whole is never adapted (`scoreParameters`, bert.ts: they are built without).
 */
function adapts(path: string, lora: LoraSpec, outputEmbeddings: boolean): boolean {
  if (excludedFromLora(path, lora.modules_to_save ?? [])) return false;
  return isAllLinear(lora.target_modules) ? !outputEmbeddings : isLoraTarget(path, lora.target_modules);
}

/**
 * A module modules_to_save names gets no adapter, nor does any module inside it: PEFT 0.21's
 * `check_target_module_exists` returns `_ExcludedModule()` when `re.match(rf"(^|.*\.){m}($|\..*)", key)` for a
 * name m, read as a regular expression (a dot in it matches any character), which must end at the end of a dot-separated
 * part. `_set_trainable` then takes the module by a plain suffix (`isSavedModule`): where that suffix is no whole part
 * ("proj" of q_proj), the adapter is in and PEFT raises (`withModulesToSave`).
 */
export function excludedFromLora(path: string, saved: readonly string[]): boolean {
  return saved.some((name) => exclusionPattern(name).test(path));
}

/**
 * The regular expression check_target_module_exists makes of a modules_to_save name, as `re.match` applies it. Read
 * without the `u` flag, as Python reads a `{` or `]` that starts nothing: as itself. Throws a SyntaxError for a name
 * neither can read, or whose repeated group repeats inside (the schema refuses those: `modulesToSaveNameProblem`).
 */
export function exclusionPattern(name: string): RegExp {
  let re = exclusionPatterns.get(name);
  if (!re) exclusionPatterns.set(name, (re = new RegExp(`^(?:(?:|.*\\.)${name}(?:$|\\..*))`)));
  return re;
}
const exclusionPatterns = new Map<string, RegExp>();

/** Why PEFT could not read a modules_to_save name as part of its pattern, or null (the schema's check). */
export function modulesToSaveNameProblem(name: string): string | null {
  try {
    exclusionPattern(name);
  } catch (error) {
    return `PEFT reads each name as part of a regular expression (re.match(rf"(^|.*\\.){name}($|\\..*)", module)), and this one is not one: ${JSON.stringify((error as Error).message)}`;
  }
  if (nestsRepetition(name)) return 'repeats a group that repeats inside, as (.*)* does: PEFT reads each name as part of a regular expression, and this one can take exponential time to match';
  return null;
}

/**
 * Whether `_set_trainable` (peft/utils/other.py) wraps the module at `path` for modules_to_save: `any(key.endswith(
 * target_key) ...)` over `named_modules(remove_duplicate=False)`, a plain suffix with no dot boundary ("norm" takes
 * every input_layernorm as well as model.norm: measured, h100_modules_to_save.json).
 */
export function isSavedModule(path: string, saved: readonly string[]): boolean {
  return saved.some((name) => path.endsWith(name));
}

/** `fnmatch.fnmatchcase` of a parameter name against a `training.freeze` pattern (`*`, `?`, `[...]`). */
export function matchesPattern(name: string, pattern: string): boolean {
  let re = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === '*') re += '.*';
    else if (c === '?') re += '.';
    else if (c === '[') {
      const end = pattern.indexOf(']', i + 2);
      if (end < 0) re += '\\[';
      else {
        let body = pattern.slice(i + 1, end).replace(/\\/g, '\\\\');
        if (body.startsWith('!')) body = `^${body.slice(1)}`;
        re += `[${body}]`;
        i = end;
      }
    } else re += c.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  }
  return new RegExp(`^${re}$`, 's').test(name);
}

/**
 * The parameters of a `nn.Linear` at `path` ([out, in] weight, maybe a bias) as the model lists them, with
 * the LoRA adapters PEFT adds after them when the module is a target.
 */
export function linearParameters(path: string, outFeatures: number, inFeatures: number, bias: boolean, dtype: ParameterSpec['dtype'], tuning: FineTuning, outputEmbeddings = false): ParameterSpec[] {
  const out: ParameterSpec[] = [{ name: `${path}.weight`, shape: [outFeatures, inFeatures], dtype, loraModule: 'nn.Linear', ...(outputEmbeddings ? { outputEmbeddings } : {}) }];
  if (bias) out.push({ name: `${path}.bias`, shape: [outFeatures], dtype });
  out.push(...loraAdapterParameters(path, inFeatures, outFeatures, tuning, outputEmbeddings));
  return out;
}

/**
 * The adapter PEFT adds to the module at `path` when it is a target (after the module's own parameters): `lora_A`
 * [r, in] and `lora_B` [out, r], fp32 whatever the precision; none otherwise. GPT-2's Conv1D reads in and out from
 * its [in, out] weight; an nn.Linear from its [out, in] one.
 */
export function loraAdapterParameters(path: string, inFeatures: number, outFeatures: number, tuning: FineTuning, outputEmbeddings = false): ParameterSpec[] {
  if (!tuning.lora || !adapts(path, tuning.lora, outputEmbeddings)) return [];
  return [
    { name: `${path}.lora_A.default.weight`, shape: [tuning.lora.r, inFeatures], dtype: 'float32', adapter: true },
    { name: `${path}.lora_B.default.weight`, shape: [outFeatures, tuning.lora.r], dtype: 'float32', adapter: true },
    // DoRA's magnitude (LoraLayer registers lora_magnitude_vector after lora_B), fp32 as PEFT upcasts adapters
    ...(tuning.lora.use_dora ? [{ name: `${path}.lora_magnitude_vector.default.weight`, shape: [outFeatures], dtype: 'float32' as const, adapter: true }] : []),
  ];
}

/**
 * Marks what does not train: with LoRA every parameter but the adapters, and the parameters a freeze pattern
 * matches. A pattern that matches nothing is reported (a typo would otherwise train everything).
 */
export function markFrozen(params: ParameterSpec[], tuning: FineTuning): { error: string | null; where: string } {
  if (tuning.lora) {
    if (!params.some((p) => p.adapter)) return { error: `no Linear module of this model matches ${JSON.stringify(tuning.lora.target_modules)}`, where: 'training.lora.target_modules' };
    for (const p of params) if (!p.buffer && !p.adapter && !p.savedModule) p.frozen = true;
  }
  for (const pattern of tuning.freeze) {
    const matched = params.filter((p) => !p.buffer && matchesPattern(p.name, pattern));
    if (!matched.length) return { error: `the pattern ${JSON.stringify(pattern)} matches no parameter (names as model.named_parameters() gives them, e.g. ${JSON.stringify(params[0]?.name ?? '')})`, where: 'training.freeze' };
    // PEFT copies a modules_to_save module after the freeze, and its wrapper makes the copy trainable again
    for (const p of matched) if (!p.savedModule) p.frozen = true;
  }
  // loss.backward() would raise "element 0 of tensors does not require grad and does not have a grad_fn"
  if (tuning.freeze.length > 0 && !params.some((p) => !p.buffer && !p.frozen)) {
    const what = tuning.lora ? 'every LoRA adapter (with LoRA the adapters are all that trains)' : 'every parameter';
    return { error: `${tuning.freeze.length === 1 ? 'this pattern freezes' : 'these patterns freeze'} ${what}: nothing would train (loss.backward() raises "element 0 of tensors does not require grad")`, where: 'training.freeze' };
  }
  return { error: null, where: '' };
}

/**
 * `lora.Linear.forward` once the base layer made `result`: the adapter path added to it. `x` stays the
 * caller's; `result` is consumed.
 */
export function loraForward(rt: Runtime, x: Tensor, result: Tensor, loraA: Tensor, loraB: Tensor, spec: LoraSpec, label: string): Tensor {
  const { cuda } = rt;
  const resultDType = result.dtype;
  const xc = toDType(rt, x, loraA.dtype, `${label} x.to(lora_A dtype)`);
  const dropped = dropout(rt, xc, spec.dropout, `${label}.lora_dropout`);
  const a = linear(rt, dropped, loraA, null, `${label}.lora_A`);
  cuda.release(dropped);
  const b = linear(rt, a, loraB, null, `${label}.lora_B`);
  cuda.release(a);
  const scaled = mulScalar(rt, b, `${label} lora * scaling`);
  cuda.release(b);
  const sum = addTensors(rt, result, scaled, `${label} result + lora`);
  cuda.release(scaled);
  cuda.release(result);
  const out = toDType(rt, sum, resultDType, `${label} result.to(${resultDType})`);
  cuda.release(sum);
  cuda.release(xc);
  return out;
}

/** A Linear module's tensors: weight, bias, and its LoRA adapter's when it has one (DoRA's magnitude too). */
interface LinearWeights {
  readonly weight: Tensor;
  readonly bias: Tensor | null;
  readonly lora: { readonly a: Tensor; readonly b: Tensor; readonly magnitude: Tensor | null } | null;
}

/**
 * `module(x)` for the Linear modules of a model whose weights are in `weights`, by path: with its adapter when it
 * has one. Each module's tensors are looked up by name on its first call (the model is loaded by then) and kept,
 * instead of three names built and looked up at every call of every layer. `base` is the module's own op:
 * `F.linear`, or GPT-2's Conv1D (its bias always there).
 */
export function linearModules(weights: ReadonlyMap<string, Tensor>, spec: LoraSpec | null, base: (rt: Runtime, x: Tensor, weight: Tensor, bias: Tensor | null, label: string) => Tensor = linear): (rt: Runtime, x: Tensor, path: string) => Tensor {
  const modules = new Map<string, LinearWeights>();
  return (rt, x, path) => {
    let m = modules.get(path);
    if (!m) {
      const loraA = weights.get(`${path}.lora_A.default.weight`);
      m = {
        weight: weights.get(`${path}.weight`)!,
        bias: weights.get(`${path}.bias`) ?? null,
        lora: loraA && spec ? { a: loraA, b: weights.get(`${path}.lora_B.default.weight`)!, magnitude: weights.get(`${path}.lora_magnitude_vector.default.weight`) ?? null } : null,
      };
      modules.set(path, m);
    }
    const out = base(rt, x, m.weight, m.bias, path);
    if (!m.lora) return out;
    if (m.lora.magnitude) return doraForward(rt, x, out, { weight: m.weight, bias: m.bias, a: m.lora.a, b: m.lora.b, magnitude: m.lora.magnitude }, spec!.dropout, path);
    return loraForward(rt, x, out, m.lora.a, m.lora.b, spec!, path);
  };
}

/** The plan's `training.lora` and `training.freeze`, as the models take them. */
export function fineTuningOf(training: { lora?: LoraSpec | undefined; freeze?: readonly string[] | undefined }): FineTuning {
  return { lora: training.lora ?? null, freeze: training.freeze ?? [] };
}

/**
 * Marks the model's frozen parameters (models with LoRA made their adapters already); a plan asking for what
 * cannot be done is told so at its field.
 */
export function applyFineTuning<M extends ModuleTree & { parameters: ParameterSpec[] }>(model: M, tuning: FineTuning): M {
  if (tuning.lora) {
    // the module class LoRA adapts here, and the names target_modules can take
    const kind = model.parameters.find((p) => p.loraModule)?.loraModule;
    const names = adaptableNames(model.parameters);
    const targets = tuning.lora.target_modules;
    const head = tokenClassifierTarget(model.parameters, targets, tuning.lora.modules_to_save ?? []);
    if (head) {
      const allLinear = isAllLinear(targets);
      throw new InputError(
        'training.lora.target_modules',
        `${JSON.stringify(head.target)} ${allLinear ? 'takes' : 'names'} ${head.module}, the token classifier PEFT's TOKEN_CLS task also keeps whole as modules_to_save: PEFT 0.21 then raises "TypeError: modules_to_save cannot be applied to modules of type <class 'peft.tuners.lora.layer.Linear'>"; ${allLinear ? 'name the modules to adapt instead' : fix(targets)}`,
      );
    }
    // PEFT 0.21's "all-linear" adapts a mixture of experts' router and experts (h100_lora_targets.json)
    const moeModules = isAllLinear(targets) ? [...new Set(model.parameters.filter((p) => p.moe).map((p) => p.name.slice(0, p.name.lastIndexOf('.'))))] : [];
    if (moeModules.length > 0) {
      throw new InputError(
        'training.lora.target_modules',
        `${JSON.stringify(targets)} takes the mixture of experts' routers and experts too (${moeModules.slice(0, 2).join(', ')}${moeModules.length > 2 ? ', ...' : ''}), which PEFT 0.21 adapts and memplan does not: name the modules to adapt instead (all-linear's others are named ${adaptableNames(model.parameters, false).join(', ')})`,
      );
    }
    if (tuning.lora.use_dora && kind === 'Conv1D') {
      throw new InputError(
        'training.lora.use_dora',
        "DoRA on GPT-2's Conv1D layers is not simulated yet: PEFT 0.21's transpose(weight, fan_in_fan_out) wraps an fp32 base weight in a new nn.Parameter at every forward, whose cast autocast caches and whose gradient PyTorch computes (measured on the H100), and transposes a bf16 or fp16 one as a view; plan LoRA without DoRA here",
      );
    }
    const unadapted = unadaptedTarget(model, targets, tuning.lora.modules_to_save ?? []);
    if (unadapted && kind) {
      throw new InputError(
        'training.lora.target_modules',
        `${JSON.stringify(unadapted.target)} names ${unadapted.module}, on which memplan does not simulate an adapter (it simulates LoRA on the ${kind} modules named ${names.join(', ')}): ${fix(targets)}`,
      );
    }
    if (!model.parameters.some((p) => p.adapter)) {
      if (!kind) throw new InputError('training.lora', `LoRA is simulated for the Hugging Face model types ${LORA_MODEL_TYPES.join(', ')}; to train part of this model, freeze the rest (training.freeze)`);
      const what = typeof targets === 'string' ? `matches ${JSON.stringify(targets)}` : `is named ${targets.map((t) => JSON.stringify(t)).join(' or ')}`;
      // PEFT's NoMatchingPeftModuleError says it too: "You may also have only targeted modules that are marked to be saved"
      const saved = (tuning.lora.modules_to_save ?? []).length > 0 && [...moduleNames(model)].some((m) => targetTaking(m, targets) !== undefined);
      if (saved) throw new InputError('training.lora.target_modules', `every module target_modules ${typeof targets === 'string' ? 'match' : 'name'} is kept whole by modules_to_save, and gets no adapter: PEFT 0.21 raises "No modules were targeted for adaptation"; name other modules to adapt`);
      throw new InputError('training.lora.target_modules', `no ${kind} of this model ${what}; its ${kind} modules are named ${names.join(', ')}`);
    }
    const saved = tuning.lora.modules_to_save ?? [];
    // PEFT's other tie (`_add_targets_to_tie`): target_modules taking embed_tokens or lm_head put LoRA on the embedding
    if (tuning.lora.ensure_weight_tying && !namesEmbeddingLayer(saved) && embeddingTie(model) !== null && targetsTakeEmbeddingLayer(targets)) {
      throw new InputError('training.lora.ensure_weight_tying', `with target_modules taking embed_tokens or lm_head on a model whose lm_head is tied to its input embedding, PEFT 0.21 ties LoRA adapters on the input embedding (lora.Embedding), which memplan does not simulate; leave ensure_weight_tying out`);
    }
    if (saved.length > 0) Object.assign(model, withModulesToSave(model, saved, tuning.lora.ensure_weight_tying ?? false));
  }
  const { error, where } = markFrozen(model.parameters, tuning);
  if (error) throw new InputError(where, error);
  return model;
}

/** The last part of each adaptable module's path: the names target_modules can take (what PEFT's defaults name). */
function adaptableNames(params: readonly ParameterSpec[], withOutputEmbeddings = true): string[] {
  const adaptable = params.filter((p) => p.loraModule && (withOutputEmbeddings || !p.outputEmbeddings));
  return [...new Set(adaptable.map((p) => p.name.slice(0, -'.weight'.length).split('.').at(-1)!))];
}

/** How to stop a target from taking a module: a name is left out of the list; a pattern is changed. */
function fix(targets: TargetModules): string {
  return typeof targets === 'string' ? 'change the pattern so that it does not match it' : 'leave it out of target_modules';
}

/**
 * The modules of the model before PEFT wraps it, as `named_modules()` names them: each parameter's and buffer's
 * module and every module above it, the tied ones (named_parameters() lists a tied weight once, under the other
 * module), and those without parameters or buffers. An adapter's and a modules_to_save copy's modules are PEFT's
 * own, not the model's.
 */
export function moduleNames(model: ModuleTree): Set<string> {
  const { parameters: params, tiedModules = [], parameterlessModules = [] } = model;
  const modules = new Set<string>();
  const addWithAncestors = (path: string) => {
    for (let end = path.length; end > 0; end = path.lastIndexOf('.', end - 1)) modules.add(path.slice(0, end));
  };
  for (const p of params) if (!p.adapter && !p.savedModule) addWithAncestors(p.name.slice(0, p.name.lastIndexOf('.')));
  for (const m of tiedModules) addWithAncestors(m);
  for (const m of parameterlessModules) addWithAncestors(m);
  return modules;
}

/**
 * A target name that matches a module of the model memplan put no adapter on: the input embedding or an LM head
 * tied to it, and a mixture of experts' router or experts, which PEFT would adapt (simulated without them, the plan
 * would not be what PEFT trains), or a module PEFT refuses to adapt (a norm, a block such as `self_attn`). A head PEFT
 * copies whole (`modules_to_save`: a classifier) takes no adapter, its original or its copy (measured:
 * lora_xlm_roberta_base_cls_amp_bf16_qvd_ckpt, whose `dense` names the classifier's too). Names that match no
 * module at all are only noted (`unmatchedTargets`).
 */
function unadaptedTarget(model: ModuleTree, targets: TargetModules, keptWhole: readonly string[]): { target: string; module: string } | null {
  const params = model.parameters;
  // "all-linear" takes only modules LoRA wraps, and leaves out the output layer
  if (isAllLinear(targets)) return null;
  const adapted = adaptedModules(params);
  // the heads PEFT wraps whole (ModulesToSaveWrapper): no adapter goes into them, the original or the copy
  const saved = [...new Set(params.filter((p) => p.savedModule).map(savedHead))];
  const inSaved = (module: string) => saved.some((head) => module === head || module.startsWith(`${head}.`));
  for (const module of moduleNames(model)) {
    // a module modules_to_save keeps whole gets no adapter either, with no word from PEFT
    if (adapted.has(module) || inSaved(module) || excludedFromLora(module, keptWhole)) continue;
    const target = targetTaking(module, targets);
    if (target !== undefined) return { target, module };
  }
  return null;
}

/**
 * A target that takes a token classifier's head: PEFT's TOKEN_CLS task keeps the head whole (`modules_to_save`)
 * only after the adapters are in (peft_model.py PeftModelForTokenClassification; SEQ_CLS sets modules_to_save
 * first, and `check_target_module_exists` then skips the head), so an adapter on it makes `_set_trainable` raise
 * a TypeError. "all-linear" takes it, since a classifier is no output embedding (measured with PEFT 0.21 on every
 * token classifier memplan simulates: test/fixtures/device/h100_lora_targets.json).
 */
function tokenClassifierTarget(params: readonly ParameterSpec[], targets: TargetModules, keptWhole: readonly string[]): { target: string; module: string } | null {
  const saved = params.find((p) => p.savedModule === 'TOKEN_CLS');
  if (!saved) return null;
  const module = savedHead(saved);
  // modules_to_save naming the head keeps it whole from the start: no adapter goes in, and nothing raises
  if (excludedFromLora(module, keptWhole)) return null;
  const target = typeof targets === 'string' && isAllLinear(targets) ? targets : targetTaking(module, targets);
  return target === undefined ? null : { target, module };
}

/** The target that takes a module: the pattern, or the first name of the list that matches it. */
function targetTaking(module: string, targets: TargetModules): string | undefined {
  return typeof targets === 'string' ? (isLoraTarget(module, targets) ? targets : undefined) : targets.find((t) => isLoraTarget(module, [t]));
}

/** The head a modules_to_save copy's parameter belongs to (`score` of `score.modules_to_save.default.weight`). */
function savedHead(p: ParameterSpec): string {
  return p.name.slice(0, p.name.indexOf('.modules_to_save.'));
}

/**
 * `training.lora.modules_to_save` as PEFT 0.21 applies it once the adapters are in (`set_additional_trainable_modules`,
 * `_set_trainable` in peft/utils/other.py): every module whose name ends with one of the names (`isSavedModule`)
 * becomes a ModulesToSaveWrapper, whose children are the module itself (`original_module`, frozen with the rest)
 * and `modules_to_save.default`, its `copy.deepcopy` in its own dtype (PEFT upcasts adapters only), which trains and
 * runs in its place (the wrapper's forward calls the copy; the original is not called). `model.to("cuda")` moves the
 * copy right after the original. A tied module's copy is a weight of its own: with PEFT 0.21's default
 * `ensure_weight_tying=False`, embed_tokens' and lm_head's copies are two weights, and the module not named runs the
 * frozen original (measured: test/fixtures/device/h100_modules_to_save.json). Returns the parameters with the
 * copies, and the optimizer's order with them where the model gives one. Refused at the field: a module LoRA adapts
 * or a part of its LoRA layer (PEFT raises, or wraps LoRA's own layers), a module inside a head a task keeps whole
 * (PEFT would copy it again, unused), a module with submodules (the copy of a block: memplan copies modules whose
 * parameters are their own), and a tied module memplan does not copy (`uncopiedModules`, or not in `tiedWeights`).
 */
export function withModulesToSave(model: ModuleTree, names: readonly string[], ensureWeightTying = false): Pick<TrainableModel, 'parameters' | 'optimizerOrder'> {
  const params = model.parameters;
  const tiedWeights = model.tiedWeights ?? {};
  const tied = model.tiedModules ?? [];
  const uncopied = model.uncopiedModules ?? [];
  const field = 'training.lora.modules_to_save';
  const tying = ensureWeightTying && namesEmbeddingLayer(names) ? embeddingTie(model) : null;
  if (tying && tying.tied.some((m) => uncopied.includes(m))) {
    throw new InputError('training.lora.ensure_weight_tying', `with modules_to_save naming ${names.map((n) => JSON.stringify(n)).join(', ')}, PEFT 0.21 ties ${tying.tied.join(', ')} to a copy of ${tying.embedding}, which memplan does not simulate on a masked LM; leave ensure_weight_tying out`);
  }
  // the names _set_trainable gets: with the tie, the input embedding's module joins them and the names that take a
  // tied module leave (`_add_modules_to_save_to_tie`: the first name that re.match-es each tied module)
  const taken = [...names];
  if (tying) {
    if (!taken.includes(tying.embedding)) taken.push(tying.embedding);
    for (const module of tying.tied) {
      const i = taken.findIndex((name) => exclusionPattern(name).test(module));
      if (i >= 0) taken.splice(i, 1);
    }
  }
  const adapted = adaptedModules(params);
  // the heads a task keeps whole already: PEFT updates their wrapper, and makes no other copy
  const heads = [...new Set(params.filter((p) => p.savedModule).map(savedHead))];
  const copies: { after: string | null; specs: ParameterSpec[] }[] = [];
  for (const module of [...moduleNames(model), ...loraLayerModules(adapted)]) {
    const name = taken.find((n) => module.endsWith(n));
    if (name === undefined || heads.includes(module)) continue;
    const takes = `${JSON.stringify(name)} takes ${module}${module === name || module.endsWith(`.${name}`) ? '' : ' (its name ends with it)'}`;
    if (adapted.has(module)) {
      throw new InputError(field, `${takes}, which target_modules adapt: PEFT 0.21 raises "TypeError: modules_to_save cannot be applied to modules of type <class 'peft.tuners.lora.layer.Linear'>"; name the module whole (its name, or its last dot-separated parts)`);
    }
    const layer = [...adapted].find((a) => module.startsWith(`${a}.`));
    if (layer !== undefined) {
      throw new InputError(field, `${takes}, a part of the LoRA layer PEFT made of ${layer} (its base_layer, lora_A, lora_B or lora_dropout), which modules_to_save cannot keep whole; name another module`);
    }
    const head = heads.find((h) => module.startsWith(`${h}.`));
    if (head !== undefined) {
      throw new InputError(field, `${takes}, inside ${head}, which PEFT's ${params.find((p) => p.savedModule && savedHead(p) === head)!.savedModule} task keeps whole already; leave it out`);
    }
    const inside = params.filter((p) => !p.adapter && p.name.startsWith(`${module}.`));
    if (inside.some((p) => p.name.indexOf('.', module.length + 1) >= 0) || heads.some((h) => h.startsWith(`${module}.`))) {
      throw new InputError(field, `${takes}, a module with submodules: memplan simulates modules_to_save on modules whose parameters are their own (an embedding, a norm, a linear layer, lm_head); name those`);
    }
    const tiedWeight = tiedWeights[`${module}.weight`];
    if (uncopied.includes(module) || (tied.includes(module) && tiedWeight === undefined)) {
      throw new InputError(field, `${takes}, whose weight or bias is another module's (tied, as a masked LM's decoder and word embedding are), which memplan does not copy for modules_to_save; leave it out`);
    }
    const own = tiedWeight === undefined ? inside : [params.find((p) => p.name === tiedWeight)!];
    // an activation or a dropout: its copy holds nothing
    if (own.length === 0) continue;
    copies.push({
      // a tied module's copy: where Module._apply visits the module, last (lm_head, each decoder's last child; other
      // tied modules are uncopied)
      after: tiedWeight === undefined ? own.at(-1)!.name : null,
      specs: own.map((p) => ({
        name: `${module}.modules_to_save.default.${tiedWeight === undefined ? p.name.slice(module.length + 1) : 'weight'}`,
        shape: [...p.shape],
        dtype: p.dtype,
        ...(p.buffer ? { buffer: true } : {}),
        savedModule: 'modules_to_save' as const,
        runsAs: [tiedWeight === undefined ? p.name : `${module}.weight`],
      })),
    });
  }
  if (tying) {
    // each tied module no name took runs a Linear whose weight is the embedding's copy (ModulesToSaveWrapper.update
    // with tied_module: `new_linear.weight = tied_module.weight`, its own weight made on the CPU and dropped)
    const copy = copies.flatMap((c) => c.specs).find((p) => p.runsAs![0] === `${tying.embedding}.weight`)!;
    const wrapped = new Set(copies.flatMap((c) => c.specs.map((p) => p.name.slice(0, p.name.indexOf('.modules_to_save.')))));
    copy.runsAs = [...copy.runsAs!, ...tying.tied.filter((m) => !wrapped.has(m)).map((m) => `${m}.weight`)];
  }
  const parameters = [...params];
  const optimizerOrder = model.optimizerOrder ? [...model.optimizerOrder] : undefined;
  for (const { after, specs } of copies) {
    const at = after === null ? parameters.length : parameters.findIndex((p) => p.name === after) + 1;
    parameters.splice(at, 0, ...specs);
    if (optimizerOrder) {
      // named_parameters: the wrapper's original_module, then its copy
      const trained = specs.filter((p) => !p.buffer);
      const last = after === null ? -1 : optimizerOrder.lastIndexOf(trained.at(-1)?.runsAs?.[0] ?? '');
      optimizerOrder.splice(last < 0 ? optimizerOrder.length : last + 1, 0, ...trained.map((p) => p.name));
    }
  }
  return optimizerOrder ? { parameters, optimizerOrder } : { parameters };
}

/** PEFT 0.21's EMBEDDING_LAYER_NAMES: the last parts of a name that make ensure_weight_tying tie. */
const EMBEDDING_LAYER_NAMES = ['embed_tokens', 'lm_head'];

/**
 * `_check_tied_modules`' `is_embedding_to_save`: a modules_to_save name whose last part is embed_tokens or lm_head
 * (GPT-2's "wte" alone is not: PEFT then warns and ties nothing).
 */
function namesEmbeddingLayer(names: readonly string[]): boolean {
  return names.some((n) => EMBEDDING_LAYER_NAMES.includes(n.split('.').at(-1)!));
}

/**
 * What ensure_weight_tying ties (`_get_module_names_tied_with_embedding`): the input embedding's module and those tied
 * to it; null on an untied model.
 */
function embeddingTie(model: ModuleTree): { embedding: string; tied: string[] } | null {
  const embedding = model.inputEmbeddings;
  const moduleOf = (weight: string) => weight.slice(0, weight.lastIndexOf('.'));
  // the modules sharing the input embedding's weight, whichever side named_parameters() lists it under
  const tied = Object.entries(model.tiedWeights ?? {}).flatMap(([a, b]) => [moduleOf(a), moduleOf(b)]).filter((m) => m !== embedding);
  return embedding === undefined || tied.length === 0 ? null : { embedding, tied: [...new Set(tied)] };
}

/**
 * `_check_tied_modules`' `is_embedding_in_target`: a list naming embed_tokens or lm_head by its last part, or a
 * pattern that `re.fullmatch`es either name.
 */
function targetsTakeEmbeddingLayer(targets: TargetModules): boolean {
  if (typeof targets !== 'string') return targets.some((t) => EMBEDDING_LAYER_NAMES.includes(t.split('.').at(-1)!));
  return !isAllLinear(targets) && EMBEDDING_LAYER_NAMES.some((name) => patternOf(targets).test(name));
}

/** The modules LoRA adapts (each a lora.Linear now), by name. */
function adaptedModules(params: readonly ParameterSpec[]): Set<string> {
  return new Set(params.filter((p) => p.adapter).map((p) => p.name.slice(0, p.name.indexOf('.lora_'))));
}

/**
 * The modules of each LoRA layer, which `_set_trainable` sees too: it lists `named_modules()` after the adapters
 * are in (LoraLayer.__init__: base_layer, then the ModuleDicts lora_dropout, lora_A, lora_B, each with its
 * `default`, the ParameterDicts lora_embedding_A and lora_embedding_B, and the ModuleDict lora_magnitude_vector).
 */
function loraLayerModules(adapted: ReadonlySet<string>): string[] {
  const parts = ['base_layer', 'lora_dropout', 'lora_dropout.default', 'lora_A', 'lora_A.default', 'lora_B', 'lora_B.default', 'lora_embedding_A', 'lora_embedding_B', 'lora_magnitude_vector'];
  return [...adapted].flatMap((m) => parts.map((part) => `${m}.${part}`));
}

/** The modules_to_save names no module's name ends with (PEFT then copies nothing, with no word): noted. */
export function unmatchedModulesToSave(model: ModuleTree, names: readonly string[]): string[] {
  const modules = [...moduleNames(model), ...loraLayerModules(adaptedModules(model.parameters))];
  return names.filter((n) => !modules.some((m) => m.endsWith(n)));
}

/**
 * `enable_input_require_grads()`, which `PeftModel.__init__` calls on a model that checkpoints: a forward hook on
 * the input embeddings module makes its output a leaf that requires grad (so that the checkpointed blocks see an
 * input that needs a gradient). The leaf and its .grad belong to the graph, which the loss holds until it is rebound.
 */
export class InputsRequireGrad {
  /** The leaf of the graph the current loss holds. */
  private graphLeaf: Parameter | null = null;
  /** The leaf of the forward that just ran: its graph is the new loss's, alive until that loss is rebound. */
  private newLeaf: Parameter | null = null;

  /** Whether the plan's fine-tuning turns it on: LoRA on a model that checkpoints. */
  static of(tuning: FineTuning, checkpointing: unknown): InputsRequireGrad | null {
    return tuning.lora !== null && checkpointing !== false ? new InputsRequireGrad() : null;
  }

  /** The hook: the input embeddings module's output becomes a leaf that requires grad. */
  hook(rt: Runtime, inputsEmbeds: Tensor): void {
    // `output.requires_grad_(True)` on the output of an embedding that trains (a modules_to_save copy) changes nothing
    if (inputsEmbeds.gradFn !== null || inputsEmbeds.requiresGrad) return;
    const leaf = new Parameter('inputs_embeds (enable_input_require_grads)', rt.cuda.ref(inputsEmbeds), rt.cuda);
    inputsEmbeds.requiresGrad = true;
    inputsEmbeds.leaf = leaf;
    this.newLeaf = leaf;
  }

  /** The previous loss was rebound: its graph, and with it the leaf's AccumulateGrad, the leaf and its .grad, go. */
  releaseGraph(rt: Runtime): void {
    const leaf = this.graphLeaf;
    if (leaf) {
      rt.cuda.release(leaf.grad);
      rt.cuda.release(leaf.tensor);
      leaf.grad = null;
    }
    this.graphLeaf = this.newLeaf;
    this.newLeaf = null;
  }
}
