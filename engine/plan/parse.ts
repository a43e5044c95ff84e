/**
 * Reading a plan: JSON text or a value, checked against the schema once, at the edge. Every problem is reported
 * with the field it concerns, e.g. `training.batch_size: must be a positive integer`.
 */
import { z } from 'zod';
import { InputError } from '../errors.ts';
import { planSchema, type Plan } from './schema.ts';

function fieldPath(path: readonly PropertyKey[]): string {
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join('');
}

function describeIssue(issue: z.core.$ZodIssue): string {
  switch (issue.code) {
    case 'invalid_type':
      return issue.input === undefined ? `is required (${issue.expected})` : `expected ${issue.expected}`;
    case 'unrecognized_keys':
      return `unknown key${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `"${k}"`).join(', ')}`;
    case 'invalid_value':
      return `expected one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
    case 'invalid_union':
      return 'does not match any accepted form (see docs/plan-format.md)';
    default:
      return issue.message;
  }
}

export function parsePlan(value: unknown): Plan {
  const result = planSchema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  // In a union, report the member that got furthest (its deepest issue) rather than "no match".
  let best: z.core.$ZodIssue = issue;
  if (issue.code === 'invalid_union') {
    const deepest = issue.errors.flat().sort((a, b) => b.path.length - a.path.length)[0];
    if (deepest) best = { ...deepest, path: [...issue.path, ...deepest.path] };
  }
  throw new InputError(fieldPath(best.path) || 'plan', describeIssue(best));
}

export function parsePlanText(text: string, source = 'plan'): Plan {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new InputError(source, `not valid JSON: ${(error as Error).message}`);
  }
  return parsePlan(value);
}
