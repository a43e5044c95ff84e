/**
 * Rows read back from `plans`, checked before they leave the main process: a row edited by hand, written by a bug
 * or half-restored from a backup becomes a `RowProblem` naming the row and the column, never a crash.
 */
import { z } from 'zod';
import { resultProblem } from './engine-checks.ts';
import { describeIssues, planJsonSchema, resultJsonSchema, type PlanRecord, type PlanSummary, type ResultJson, type RowProblem } from '../../common/ipc.ts';

export interface PlanRow {
  id: string;
  name: string;
  notes: string;
  tags_json: string;
  search_text: string;
  plan_json: string;
  plan_valid: number;
  result_json: string | null;
  result_kind: string | null;
  result_version: number | null;
  result_fits: number | null;
  result_peak_reserved_bytes: number | null;
  result_max_batch: number | null;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
  undo_token: string | null;
}

const flag = z.union([z.literal(0), z.literal(1)]).transform((v) => v === 1);
const nullableFlag = flag.nullable();

const summaryRowSchema = z.object({
  id: z.uuid(),
  name: z.string(),
  notes: z.string(),
  tags_json: z.string().transform((text, ctx) => {
    const tags = z.array(z.string()).safeParse(safeJson(text));
    if (!tags.success) {
      ctx.addIssue({ code: 'custom', message: 'is not a JSON list of strings' });
      return z.NEVER;
    }
    return tags.data;
  }),
  plan_valid: flag,
  result_kind: z.string().nullable(),
  result_version: z.number().int().nullable(),
  result_fits: nullableFlag,
  result_peak_reserved_bytes: z.number().nullable(),
  result_max_batch: z.number().int().nullable(),
  created_at: z.iso.datetime(),
  updated_at: z.iso.datetime(),
});

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

type Read<T> = { ok: true; value: T } | { ok: false; problem: RowProblem };

function problem(row: PlanRow, message: string): { ok: false; problem: RowProblem } {
  return { ok: false, problem: { id: String(row.id), message: `saved plan ${String(row.id)} (${JSON.stringify(String(row.name))}) could not be read: ${message}` } };
}

export function readSummary(row: PlanRow): Read<PlanSummary> {
  const parsed = summaryRowSchema.safeParse(row);
  if (!parsed.success) return problem(row, describeIssues(parsed.error));
  const r = parsed.data;
  return {
    ok: true,
    value: {
      id: r.id,
      name: r.name,
      notes: r.notes,
      tags: r.tags_json,
      created_at: r.created_at,
      updated_at: r.updated_at,
      plan_valid: r.plan_valid,
      result_summary:
        r.result_kind === null || r.result_version === null
          ? null
          : { kind: r.result_kind, schema_version: r.result_version, fits: r.result_fits, peak_reserved_bytes: r.result_peak_reserved_bytes, max_batch: r.result_max_batch },
    },
  };
}

export function readRecord(row: PlanRow): Read<PlanRecord> {
  const summary = readSummary(row);
  if (!summary.ok) return summary;
  const plan = planJsonSchema.safeParse(safeJson(row.plan_json));
  if (!plan.success) return problem(row, `plan_json: ${describeIssues(plan.error)}`);
  let result: ResultJson | null = null;
  if (row.result_json !== null) {
    const parsed = resultJsonSchema.safeParse(safeJson(row.result_json));
    if (!parsed.success) return problem(row, `result_json: ${describeIssues(parsed.error)}`);
    // A result the engine cannot read any more (an older schema_version) is left out: the plan re-simulates.
    // result_summary still says what it was.
    result = resultProblem(parsed.data) === null ? parsed.data : null;
  }
  return { ok: true, value: { ...summary.value, plan: plan.data, result } };
}

/** The columns the list reads instead of result_json: kind, version, fits, peak reserved (simulate), max batch. */
export function summaryColumns(result: ResultJson | null): Pick<PlanRow, 'result_kind' | 'result_version' | 'result_fits' | 'result_peak_reserved_bytes' | 'result_max_batch'> {
  if (result === null) return { result_kind: null, result_version: null, result_fits: null, result_peak_reserved_bytes: null, result_max_batch: null };
  const number = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : null);
  const maxBatch = result.kind === 'max_batch' ? number(result['max_batch']) : null;
  const fits = result.kind === 'simulate' && typeof result['fits'] === 'boolean' ? result['fits'] : maxBatch !== null ? maxBatch > 0 : null;
  return {
    result_kind: result.kind,
    result_version: result.schema_version,
    result_fits: fits === null ? null : fits ? 1 : 0,
    result_peak_reserved_bytes: result.kind === 'simulate' ? number(result['peak_reserved_bytes']) : null,
    result_max_batch: maxBatch === null ? null : Math.trunc(maxBatch),
  };
}
