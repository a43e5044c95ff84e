/**
 * Saved comparisons (tables `comparisons` and `comparison_plans`, migrations.ts): a name and 2 to 4 plans in column
 * order, each with the version compared (the plan's `updated_at` when the comparison was saved). Reading one back
 * gives each plan as it is now and says whether it was edited, deleted or cannot be read since: a comparison
 * reopens as it was saved, and never pretends that an edited plan is the one compared.
 *
 * Arguments arrive validated by the IPC contract; rows read back are validated again, so a damaged row is a
 * `RowProblem`, not a crash.
 */
import { randomUUID } from 'node:crypto';
import type Database from 'better-sqlite3';
import { z } from 'zod';
import { describeIssues, type ComparisonUndoToken, type ComparedPlan, type ComparisonList, type ComparisonRecord, type ComparisonSummary, type ParsedArgs, type RowProblem } from '../../common/ipc.ts';
import { PlanNotFoundError, PURGE_DELETED_AFTER_MS, type PlanStore } from './plan-store.ts';

/** No comparison with that id (or it is deleted): the handlers answer `not_found`. */
export class ComparisonNotFoundError extends Error {
  readonly code = 'not_found';
  constructor(id: string) {
    super(`no saved comparison with id ${id}`);
    this.name = 'ComparisonNotFoundError';
  }
}

interface ComparisonRow {
  id: string;
  name: string;
  created_at: string;
  updated_at: string;
}

interface ComparedRow {
  plan_id: string;
  plan_updated_at: string;
}

const comparisonRowSchema = z.object({ id: z.uuid(), name: z.string(), created_at: z.iso.datetime(), updated_at: z.iso.datetime() });
const comparedRowsSchema = z.array(z.object({ plan_id: z.uuid(), plan_updated_at: z.union([z.iso.datetime(), z.literal('')]) })).min(1, 'has no plans');

type Read<T> = { ok: true; value: T } | { ok: false; problem: RowProblem };

export interface ComparisonStoreOptions {
  now?: () => Date;
  newId?: () => string;
}

export class ComparisonStore {
  readonly #db: Database.Database;
  readonly #plans: PlanStore;
  readonly #now: () => Date;
  readonly #newId: () => string;

  constructor(db: Database.Database, plans: PlanStore, options: ComparisonStoreOptions = {}) {
    this.#db = db;
    this.#plans = plans;
    this.#now = options.now ?? (() => new Date());
    this.#newId = options.newId ?? randomUUID;
  }

  #compared(id: string): ComparedRow[] {
    return this.#db.prepare('SELECT plan_id, plan_updated_at FROM comparison_plans WHERE comparison_id = ? ORDER BY position').all(id) as ComparedRow[];
  }

  #read(row: ComparisonRow): Read<{ summary: ComparisonSummary; compared: z.output<typeof comparedRowsSchema> }> {
    const parsed = comparisonRowSchema.safeParse(row);
    const compared = comparedRowsSchema.safeParse(this.#compared(String(row.id)));
    if (!parsed.success || !compared.success) {
      const message = !parsed.success ? describeIssues(parsed.error) : describeIssues(compared.error!, ['plans']);
      return { ok: false, problem: { id: String(row.id), message: `saved comparison ${String(row.id)} (${JSON.stringify(String(row.name))}) could not be read: ${message}` } };
    }
    return { ok: true, value: { summary: { ...parsed.data, plan_ids: compared.data.map((c) => c.plan_id) }, compared: compared.data } };
  }

  #row(id: string): ComparisonRow | undefined {
    return this.#db.prepare('SELECT id, name, created_at, updated_at FROM comparisons WHERE id = ? AND deleted_at IS NULL').get(id) as ComparisonRow | undefined;
  }

  /** Saved comparisons, newest first (last saved). */
  list(): ComparisonList {
    const rows = this.#db.prepare('SELECT id, name, created_at, updated_at FROM comparisons WHERE deleted_at IS NULL ORDER BY updated_at DESC, rowid DESC').all() as ComparisonRow[];
    const list: ComparisonList = { comparisons: [], problems: [] };
    for (const row of rows) {
      const read = this.#read(row);
      if (read.ok) list.comparisons.push(read.value.summary);
      else list.problems.push(read.problem);
    }
    return list;
  }

  /** The comparison with each plan as it is now; null when there is none (or it is deleted). Throws for a damaged row. */
  get(id: string): ComparisonRecord | null {
    const row = this.#row(id);
    if (!row) return null;
    const read = this.#read(row);
    if (!read.ok) throw new Error(read.problem.message);
    const plans: ComparedPlan[] = read.value.compared.map(({ plan_id, plan_updated_at }) => {
      const compared_updated_at = plan_updated_at === '' ? null : plan_updated_at;
      let plan;
      try {
        plan = this.#plans.get(plan_id);
      } catch {
        return { plan_id, compared_updated_at, status: 'damaged', plan: null };
      }
      if (plan === null) return { plan_id, compared_updated_at, status: 'deleted', plan: null };
      return { plan_id, compared_updated_at, status: plan.updated_at === compared_updated_at ? 'current' : 'edited', plan };
    });
    return { ...read.value.summary, plans };
  }

  /** Inserts (no id) or replaces (id) a comparison; each plan is recorded at its current version. */
  save(args: ParsedArgs<'comparisons:save'>): ComparisonSummary {
    return this.#db.transaction(() => {
      const versions = args.plan_ids.map((planId) => {
        const plan = this.#plans.get(planId);
        if (plan === null) throw new PlanNotFoundError(planId);
        return plan.updated_at;
      });
      const now = this.#now().toISOString();
      let id = args.id;
      if (id === undefined) {
        id = this.#newId();
        this.#db.prepare('INSERT INTO comparisons (id, name, created_at, updated_at) VALUES (?, ?, ?, ?)').run(id, args.name, now, now);
      } else {
        const changed = this.#db.prepare('UPDATE comparisons SET name = ?, updated_at = ? WHERE id = ? AND deleted_at IS NULL').run(args.name, now, id).changes;
        if (changed === 0) throw new ComparisonNotFoundError(id);
        this.#db.prepare('DELETE FROM comparison_plans WHERE comparison_id = ?').run(id);
      }
      const insert = this.#db.prepare('INSERT INTO comparison_plans (comparison_id, position, plan_id, plan_updated_at) VALUES (?, ?, ?, ?)');
      args.plan_ids.forEach((planId, position) => insert.run(id, position, planId, versions[position]));
      const read = this.#read(this.#row(id)!);
      if (!read.ok) throw new Error(read.problem.message);
      return read.value.summary;
    })();
  }

  /** Soft delete, as for plans: the comparison leaves the list (its plans are untouched); the answer is what restore needs. */
  delete(id: string): ComparisonUndoToken {
    const token = randomUUID();
    const changed = this.#db.prepare('UPDATE comparisons SET deleted_at = ?, undo_token = ? WHERE id = ? AND deleted_at IS NULL').run(this.#now().toISOString(), token, id).changes;
    if (changed === 0) throw new ComparisonNotFoundError(id);
    return { id, undo_token: token };
  }

  /** Undoes the delete that answered `undo_token` (it keeps its place in the list: updated_at is not touched). */
  restore({ id, undo_token }: ComparisonUndoToken): ComparisonSummary {
    const changed = this.#db.prepare('UPDATE comparisons SET deleted_at = NULL, undo_token = NULL WHERE id = ? AND deleted_at IS NOT NULL AND undo_token = ?').run(id, undo_token).changes;
    if (changed === 0) throw new ComparisonNotFoundError(`${id} awaiting restore with that undo token`);
    const read = this.#read(this.#row(id)!);
    if (!read.ok) throw new Error(read.problem.message);
    return read.value.summary;
  }

  /** Removes comparisons deleted more than `PURGE_DELETED_AFTER_MS` ago (their rows in comparison_plans cascade); returns how many. */
  purgeDeleted(now: Date = this.#now()): number {
    const before = new Date(now.getTime() - PURGE_DELETED_AFTER_MS).toISOString();
    return this.#db.prepare('DELETE FROM comparisons WHERE deleted_at IS NOT NULL AND deleted_at < ?').run(before).changes;
  }
}
