/**
 * The engine's ids worded for people: phases, memory categories, advice and notes (engine/result/advice.ts says
 * which parameters each id carries). One place, so the views and the charts say the same thing.
 */
import type { AdviceItem, Caveat, NotApplicable, Note } from '../../../engine/result/index.ts';
import type { Locale } from '../i18n/types.ts';
import { results, type ResultMessages } from '../i18n/results.ts';
import type { Category } from '../charts/categories.ts';
import { formatBytes, formatCount } from '../charts/units.ts';
import { LORA_MODEL_TYPES, loraConfigCode } from '../../../engine/index.ts';
import { catalogues } from '../i18n/index.ts';
import { localizeEngineMessage } from '../i18n/issues.ts';

export type M = ResultMessages;
export const messagesFor = (locale: Locale): M => results[locale] as M;

export function phaseName(m: M, phase: string): string {
  switch (phase) {
    case 'load':
      return m.rPhaseLoad;
    case 'forward':
      return m.rPhaseForward;
    case 'backward':
      return m.rPhaseBackward;
    case 'optimizer':
      return m.rPhaseOptimizer;
    case 'zero_grad':
      return m.rPhaseZeroGrad;
    default:
      return phase;
  }
}

export function categoryName(m: M, c: Category): string {
  return {
    parameter: m.rCatParameter,
    gradient: m.rCatGradient,
    optimizer_state: m.rCatOptimizerState,
    activation: m.rCatActivation,
    temporary: m.rCatTemporary,
    workspace: m.rCatWorkspace,
    input: m.rCatInput,
    cached_free: m.rCatCachedFree,
  }[c];
}

export function categoryHint(m: M, c: Category): string {
  return c === 'activation' ? m.rCatActivationHint : c === 'temporary' ? m.rCatTemporaryHint : c === 'workspace' ? m.rCatWorkspaceHint : c === 'cached_free' ? m.rCatCachedFreeHint : '';
}

/** The torch.optim class of each optimizer (momentum is an argument of SGD): code, the same in every language. */
const OPTIMIZER_NAMES: Record<string, string> = { sgd: 'SGD', sgd_momentum: 'SGD', adam: 'Adam', adamw: 'AdamW' };

export interface AdviceWords {
  title: string;
  /** A second line: the exact setting, or what it keeps equal. */
  detail: string | null;
  /** The setting to copy, in code font. */
  code: string | null;
  cost: string;
}

export function adviceWords(m: M, a: AdviceItem, locale: Locale): AdviceWords {
  const n = (v: number) => formatCount(v, locale);
  switch (a.id) {
    case 'amp_bf16':
      return { title: m.rAdviceAmpBf16, detail: null, code: 'torch.autocast("cuda", dtype=torch.bfloat16)', cost: m.rAdviceAmpBf16Cost };
    case 'bf16_weights':
      return {
        title: a.lora ? m.rAdviceBf16Base : m.rAdviceBf16Weights,
        detail: null,
        code: a.hugging_face ? 'from_pretrained(..., dtype=torch.bfloat16)' : 'model.to(torch.bfloat16)',
        cost: a.lora ? m.rAdviceBf16BaseCost : m.rAdviceBf16WeightsCost,
      };
    case 'checkpointing':
      return { title: m.rAdviceCheckpointing, detail: null, code: 'torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)', cost: m.rAdviceCheckpointingCost };
    case 'fused_optimizer':
      return { title: m.rAdviceFusedOptimizer(OPTIMIZER_NAMES[a.optimizer] ?? a.optimizer), detail: null, code: null, cost: m.rAdviceFusedOptimizerCost };
    case 'accumulation':
      return {
        title: m.rAdviceAccumulation(n(a.micro_batch), a.steps),
        detail: a.effective_batch === a.plan_effective_batch ? m.rAdviceAccumulationSame(n(a.effective_batch)) : m.rAdviceAccumulationOther(n(a.effective_batch), n(a.plan_effective_batch)),
        code: null,
        cost: m.rAdviceAccumulationCost,
      };
    case 'expandable_segments':
      return { title: m.rAdviceExpandable, detail: null, code: `PYTORCH_CUDA_ALLOC_CONF=${a.alloc_conf}`, cost: m.rAdviceExpandableCost };
    case 'sdpa':
      return { title: m.rAdviceSdpa, detail: null, code: null, cost: m.rAdviceSdpaCost };
    case 'lora':
      return {
        title: m.rAdviceLora,
        detail: m.rAdviceLoraDetail(n(a.r), n(a.alpha), a.target_modules.join(', ')),
        code: loraConfigCode(a),
        cost: m.rAdviceLoraCost,
      };
  }
}

/**
 * Why a change is not advised (`not_applicable`), as the CLI says it (cli/words.ts `notApplicableText`): the
 * change's name and the reason. LoRA's model types come from the engine's list, not the engine's English message.
 */
export function notAdvisedWords(m: M, n: NotApplicable, locale: Locale): { change: string; reason: string } {
  const reason = (): string => {
    switch (n.reason_id) {
      case 'already_set':
        return n.id === 'amp_bf16' ? m.rWhyAlreadyReducedPrecision : n.id === 'bf16_weights' ? m.rWhyAlreadyHalfWeights : n.id === 'lora' ? m.rWhyAlreadyPartial : m.rWhyAlreadySet;
      case 'no_optimizer_state':
        return m.rWhyNoOptimizerState;
      case 'batch_of_one':
        return m.rWhyBatchOfOne;
      case 'saves_nothing':
        return m.rWhySavesNothing;
      case 'uses_more_memory':
        return m.rWhyUsesMore(formatBytes(-(n.saved_bytes ?? 0), locale));
      case 'no_larger_batch':
        return m.rWhyNoLargerBatch;
      case 'plan_fits':
        return m.rWhyPlanFits;
      case 'not_simulated':
        return m.rWhyNotSimulated(n.message ? localizeEngineMessage(n.message, catalogues[locale], locale) : '');
      case 'fails_in_pytorch':
        return m.rWhyFailsInPytorch(n.message ? localizeEngineMessage(n.message, catalogues[locale], locale) : '');
      case 'no_default_targets':
        return m.rWhyLoraModels(LORA_MODEL_TYPES);
      case 'needs_amp_bf16':
        return m.rWhyNeedsAmpBf16;
      case 'gpu_without_bf16':
        return m.rWhyGpuWithoutBf16;
    }
  };
  return { change: m.rChangeName(n.id), reason: reason() };
}

export function noteText(m: M, n: Note, locale: Locale): string {
  switch (n.id) {
    case 'parameters_loaded_in_training_dtype':
      return m.rNoteParametersInDtype;
    case 'stopped_at_oom':
      return m.rNoteStoppedAtOom(n.step, phaseName(m, n.phase));
    case 'custom_gpu_from_cap':
      return m.rNoteCustomGpu(n.base_gpu, formatBytes(n.memory_limit_bytes, locale));
    case 'not_steady':
      return m.rNoteNotSteady(n.steps, n.reason);
    case 'checkpoint_inputs_no_grad':
      return m.rNoteCheckpointInputsNoGrad(n.blocks);
    case 'lora_targets_unmatched':
      return m.rNoteLoraTargetsUnmatched(n.targets);
    case 'lora_modules_to_save_unmatched':
      return m.rNoteLoraModulesToSaveUnmatched(n.modules);
    case 'needs_more_than_simulated':
      return m.rNoteNeedsMoreThanSimulated(formatBytes(n.bytes, locale));
  }
}

/**
 * A caveat (engine/result/caveats.ts) in words: an `assumption` every answer makes, or a `ground` of the
 * confidence (what was, and was not, measured for this GPU and plan).
 */
export function caveatWords(m: M, c: Caveat, locale: Locale, gpuName: (id: string) => string = (id) => id): { kind: 'assumption' | 'ground'; text: string } {
  switch (c.id) {
    case 'parameters_loaded_in_training_dtype':
      return { kind: 'assumption', text: m.rCaveatLoaded(c.built_by) };
    case 'standard_step':
      return { kind: 'assumption', text: m.rCaveatStep(c.grad_accumulation_steps) };
    case 'fresh_process':
      return { kind: 'assumption', text: m.rCaveatFresh };
    case 'steady_state':
      return { kind: 'assumption', text: m.rCaveatSteady };
    case 'calibrated_gpu':
      return { kind: 'ground', text: m.rCaveatCalibrated(gpuName(c.gpu)) };
    case 'workspaces_from_h100':
      return { kind: 'ground', text: m.rCaveatWorkspaces(gpuName(c.gpu)) };
    case 'gpu_figures_not_measured':
      return { kind: 'ground', text: m.rCaveatFigures(gpuName(c.gpu), m.rEvidence(c.total_memory), m.rEvidence(c.non_pytorch)) };
    case 'custom_gpu':
      return { kind: 'ground', text: m.rCaveatCustom };
    case 'grad_scaler_steps_update':
      return { kind: 'ground', text: m.rCaveatScaler };
    case 'family_not_measured':
      // Gemma: a result saved before Gemma 2 2B and Gemma 3 1B were measured says what it said then
      if (c.family === 'mixtral') return { kind: 'ground', text: m.rCaveatMixtralNotMeasured };
      if (c.family === 'qwen3_moe') return { kind: 'ground', text: m.rCaveatQwen3MoeNotMeasured };
      return { kind: 'ground', text: m.rCaveatFamilyNotMeasured(c.family === 'gemma2' ? 'Gemma 2' : 'Gemma 3') };
    case 'moe_routing':
      return { kind: 'assumption', text: m.rCaveatMoeRouting(c.experts, c.top_k) };
    case 'known_gap':
      return { kind: 'ground', text: m.rCaveatVitGap };
    case 'conv_workspaces_estimated':
      return { kind: 'ground', text: m.rCaveatConvEstimated(formatCount(c.batch, locale)) };
    case 'bf16_emulated':
      return { kind: 'ground', text: m.rCaveatBf16Emulated(gpuName(c.gpu)) };
  }
}
