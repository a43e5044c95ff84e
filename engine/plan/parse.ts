/**
 * Reading a plan: JSON text or a value, checked against the schema once, at the edge. Every problem is reported
 * with the field it concerns, e.g. `training.batch_size: must be a positive integer`.
 */
import { z } from 'zod';
import { InputError, describeSchemaIssue, fieldPath } from '../errors.ts';
import { planSchema, type Plan } from './schema.ts';

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
  throw new InputError(fieldPath(best.path) || 'plan', describeSchemaIssue(best));
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
