/**
 * Reading a plan: JSON text or a value, checked once, at the edge. `safeParsePlan` returns every problem as a
 * value (a plan editor shows them beside their fields); `parsePlan` throws them as one InputIssuesError (the CLI).
 * Beyond the schema it checks what a simulation would otherwise reject later: a pasted config.json, the
 * allocator settings, (given the catalog) the GPU's name, and that the plan is not too large to simulate
 * (limits.ts: layers, parameters, micro-steps, allocator events, the memory cap).
 */
import { allocatorRunFailure, parseAllocatorConf } from '../allocator/config.ts';
import { InputError, InputIssuesError } from '../errors.ts';
import { findGpu, type GpuCatalog } from '../gpu/catalog.ts';
import { checkHeadPrecision, checkLastTokenBatch, resolveHfConfig, type HfConfig } from '../models/hf/config.ts';
import type { Issue } from '../result/common.ts';
import { issueOf, schemaIssues } from './issues.ts';
import { limitIssues, rawLayerIssue } from './limits.ts';
import { hfConfigOf, planSchema, type Plan } from './schema.ts';

export type PlanParse = { ok: true; plan: Plan } | { ok: false; issues: Issue[] };

export interface ParsePlanOptions {
  /** Check `gpu.name` against this catalog (the edges pass theirs). */
  catalog?: GpuCatalog;
}

/** A Hugging Face config.json given where a plan was expected. */
function looksLikeHfConfig(value: unknown): boolean {
  return typeof value === 'object' && value !== null && !('format' in value) && ('model_type' in value || 'architectures' in value);
}

/** Problems that a check beyond the schema finds, as issues (the first of each check). */
function laterIssues(plan: Plan, options: ParsePlanOptions): Issue[] {
  const issues: Issue[] = [];
  const check = (fn: () => unknown) => {
    try {
      fn();
    } catch (error) {
      if (!(error instanceof InputError)) throw error;
      issues.push(issueOf(error));
    }
  };
  let hf: HfConfig | null = null;
  if ('hf_config' in plan.model) {
    const config = plan.model.hf_config;
    check(() => (hf = resolveHfConfig(config)));
  }
  check(() => parseAllocatorConf(plan.allocator.conf, 'allocator.conf'));
  const gpu = plan.gpu;
  if (options.catalog && gpu && 'name' in gpu) {
    const catalog = options.catalog;
    check(() => findGpu(catalog, gpu.name));
  }
  if ('preset' in plan.model) {
    const config = hfConfigOf(plan.model);
    if (config) hf = resolveHfConfig(config);
  }
  const resolved: HfConfig | null = hf;
  if (resolved) check(() => checkHeadPrecision(resolved, plan.training.precision));
  if (resolved) check(() => checkLastTokenBatch(resolved, plan.training.batch_size));
  if (issues.length) return issues;
  // What simulating it implies (engine/plan/limits.ts): checked last, on a plan otherwise valid.
  return limitIssues(plan, hf);
}

/**
 * Why PyTorch itself fails the step of a valid plan's variant (advice's and compare's changes are made after the
 * plan was checked): expandable segments whose large pool maps pages of an odd number of MB (`runFailure` in
 * engine/allocator/config.ts), a regression head on half-precision weights (`checkHeadPrecision`), a batch of more
 * than one sequence for a decoder classifier without `pad_token_id` (`checkLastTokenBatch`). Null when it does not.
 */
export function pytorchFailure(plan: Plan): string | null {
  const allocatorFailure = allocatorRunFailure(plan.allocator.conf);
  if (allocatorFailure) return allocatorFailure;
  const config = hfConfigOf(plan.model);
  if (!config) return null;
  const resolved = resolveHfConfig(config); // a variant of a valid plan: its config resolves
  try {
    checkHeadPrecision(resolved, plan.training.precision);
    checkLastTokenBatch(resolved, plan.training.batch_size);
    return null;
  } catch (error) {
    if (error instanceof InputError) return error.message;
    throw error;
  }
}

/** Every problem of the plan, or the plan with its defaults filled in. */
export function safeParsePlan(value: unknown, options: ParsePlanOptions = {}): PlanParse {
  if (looksLikeHfConfig(value)) {
    return {
      ok: false,
      issues: [{ path: '', message: 'this is a Hugging Face config.json, not a plan: put it under model.hf_config in a plan ("model": {"hf_config": {...}}), with the training settings beside it (docs/plan-format.md)' }],
    };
  }
  const tooMany = rawLayerIssue(value);
  if (tooMany) return { ok: false, issues: [tooMany] };
  const result = planSchema.safeParse(value, { reportInput: true });
  if (!result.success) return { ok: false, issues: schemaIssues(result.error, value, planSchema) };
  const issues = laterIssues(result.data, options);
  return issues.length ? { ok: false, issues } : { ok: true, plan: result.data };
}

export function parsePlan(value: unknown, options: ParsePlanOptions = {}): Plan {
  const result = safeParsePlan(value, options);
  if (result.ok) return result.plan;
  throw new InputIssuesError(result.issues);
}

/** JSON text as a value, or the one issue that it is not JSON. */
export function safeParseJson(text: string, source = 'plan'): { ok: true; value: unknown } | { ok: false; issues: Issue[] } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (error) {
    return { ok: false, issues: [{ path: source, message: `not valid JSON: ${(error as Error).message}` }] };
  }
}

export function parsePlanText(text: string, source = 'plan', options: ParsePlanOptions = {}): Plan {
  const json = safeParseJson(text, source);
  if (!json.ok) throw new InputIssuesError(json.issues);
  return parsePlan(json.value, options);
}

/**
 * A pasted config.json on its own (a model editor's paste box): its problems as issues at
 * `model.hf_config.<key>`, as in a plan. The first problem of the config's own fields is reported (they are
 * checked one after another: a later field's check needs the earlier ones).
 */
export function safeParseHfConfig(value: unknown): { ok: true; config: Record<string, unknown> } | { ok: false; issues: Issue[] } {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { ok: false, issues: [{ path: 'model.hf_config', message: 'expected an object (the contents of config.json)' }] };
  const config = value as Record<string, unknown>;
  try {
    resolveHfConfig(config);
  } catch (error) {
    if (!(error instanceof InputError)) throw error;
    return { ok: false, issues: [issueOf(error)] };
  }
  return { ok: true, config };
}
