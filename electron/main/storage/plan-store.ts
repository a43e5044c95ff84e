/**
 * The saved plans (table `plans`, migrations.ts): list with search, get, save, rename, duplicate, soft delete with
 * an undo token, restore. Arguments arrive validated by the IPC contract; rows read back are validated again
 * (rows.ts), so a row damaged by hand or by a bug is reported, not thrown at the renderer.
 */
import { randomUUID } from 'node:crypto';
import type Database from 'better-sqlite3';
import { MAX_PLAN_JSON_BYTES, MAX_RESULT_JSON_BYTES, type ParsedArgs, type PlanList, type PlanRecord, type PlanSummary, type UndoToken } from '../../common/ipc.ts';
import { isCompletePlan, resultJsonReplacer, resultProblem } from './engine-checks.ts';
import { storageFailure } from './errors.ts';
import { readRecord, readSummary, summaryColumns, type PlanRow } from './rows.ts';

/** Deleted plans stay restorable this long, then are purged when the database is opened. */
export const PURGE_DELETED_AFTER_MS = 30 * 24 * 3600 * 1000;

/** No plan with that id (or it is deleted): the handlers answer `not_found`. */
export class PlanNotFoundError extends Error {
  readonly code = 'not_found';
  constructor(id: string) {
    super(`no saved plan with id ${id}`);
    this.name = 'PlanNotFoundError';
  }
}

/** An argument the contract let through but the store refuses (too large as JSON, a result the engine would not
 * return): the handlers answer `invalid_args`. */
export class PlanArgumentError extends Error {
  readonly code = 'invalid_args';
  constructor(message: string) {
    super(message);
    this.name = 'PlanArgumentError';
  }
}

function toJson(value: unknown, field: string, maxBytes: number): string {
  const json = JSON.stringify(value, resultJsonReplacer);
  const size = Buffer.byteLength(json);
  if (size > maxBytes) throw new PlanArgumentError(`${field}: is ${size} bytes as JSON, at most ${maxBytes} are stored`);
  return json;
}

/** What is searched: name, notes and tags, lower-cased in JavaScript (SQLite's lower() only knows ASCII). */
function searchText(name: string, notes: string, tags: readonly string[]): string {
  return [name, notes, ...tags].join('\n').toLowerCase();
}

export interface PlanStoreOptions {
  now?: () => Date;
  newId?: () => string;
}

type SaveArgs = ParsedArgs<'plans:save'>;

export class PlanStore {
  readonly #db: Database.Database;
  readonly #now: () => Date;
  readonly #newId: () => string;

  constructor(db: Database.Database, options: PlanStoreOptions = {}) {
    this.#db = db;
    this.#now = options.now ?? (() => new Date());
    this.#newId = options.newId ?? randomUUID;
  }

  #timestamp(): string {
    return this.#now().toISOString();
  }

  #row(id: string): PlanRow | undefined {
    return this.#db.prepare('SELECT * FROM plans WHERE id = ? AND deleted_at IS NULL').get(id) as PlanRow | undefined;
  }

  #summary(id: string): PlanSummary {
    const row = this.#row(id);
    if (!row) throw new PlanNotFoundError(id);
    const read = readSummary(row);
    if (!read.ok) throw new Error(read.problem.message);
    return read.value;
  }

  /** Listed plans whose name, notes or tags contain every word of the query (case-insensitive); newest first. */
  list(query = ''): PlanList {
    const words = query.toLowerCase().split(/\s+/).filter(Boolean);
    const where = ['deleted_at IS NULL', ...words.map(() => 'instr(search_text, ?) > 0')].join(' AND ');
    const rows = this.#db.prepare(`SELECT * FROM plans WHERE ${where} ORDER BY updated_at DESC, rowid DESC`).all(...words) as PlanRow[];
    const list: PlanList = { plans: [], problems: [] };
    for (const row of rows) {
      const read = readSummary(row);
      if (read.ok) list.plans.push(read.value);
      else list.problems.push(read.problem);
    }
    return list;
  }

  /** The plan with its plan file and result; null when there is none (or it is deleted). Throws for a damaged row. */
  get(id: string): PlanRecord | null {
    const row = this.#row(id);
    if (!row) return null;
    const read = readRecord(row);
    if (!read.ok) throw new Error(read.problem.message);
    return read.value;
  }

  /** Runs a write; a refusal of the file system (a full disk, a read-only file) becomes a StorageError in words. */
  #writing<T>(doing: string, write: () => T): T {
    try {
      return write();
    } catch (error) {
      throw storageFailure(error, this.#db.name, doing);
    }
  }

  /**
   * Inserts (no id) or replaces every field of (id) a plan; the name is written into the plan file too. A full disk
   * or a read-only database throws a StorageError (errors.ts) and changes nothing.
   */
  save(args: SaveArgs): PlanSummary {
    return this.#writing(`could not save "${args.name}"`, () => this.#save(args));
  }

  #save(args: SaveArgs): PlanSummary {
    const plan = { ...args.plan, name: args.name };
    const planJson = toJson(plan, 'plan', MAX_PLAN_JSON_BYTES);
    const result = args.result ?? null;
    const problem = result === null ? null : resultProblem(result);
    if (problem !== null) throw new PlanArgumentError(problem);
    const resultJson = result === null ? null : toJson(result, 'result', MAX_RESULT_JSON_BYTES);
    const columns = {
      name: args.name,
      notes: args.notes,
      tags_json: JSON.stringify(args.tags),
      search_text: searchText(args.name, args.notes, args.tags),
      plan_json: planJson,
      plan_valid: isCompletePlan(plan) ? 1 : 0,
      result_json: resultJson,
      ...summaryColumns(result),
      updated_at: this.#timestamp(),
    };
    if (args.id === undefined) {
      const id = this.#newId();
      this.#db
        .prepare(
          `INSERT INTO plans (id, name, notes, tags_json, search_text, plan_json, plan_valid, result_json, result_kind, result_version,
             result_fits, result_peak_reserved_bytes, result_max_batch, created_at, updated_at)
           VALUES (@id, @name, @notes, @tags_json, @search_text, @plan_json, @plan_valid, @result_json, @result_kind, @result_version,
             @result_fits, @result_peak_reserved_bytes, @result_max_batch, @updated_at, @updated_at)`,
        )
        .run({ id, ...columns });
      return this.#summary(id);
    }
    const changed = this.#db
      .prepare(
        `UPDATE plans SET name = @name, notes = @notes, tags_json = @tags_json, search_text = @search_text, plan_json = @plan_json,
           plan_valid = @plan_valid, result_json = @result_json, result_kind = @result_kind, result_version = @result_version,
           result_fits = @result_fits, result_peak_reserved_bytes = @result_peak_reserved_bytes, result_max_batch = @result_max_batch,
           updated_at = @updated_at
         WHERE id = @id AND deleted_at IS NULL`,
      )
      .run({ id: args.id, ...columns }).changes;
    if (changed === 0) throw new PlanNotFoundError(args.id);
    return this.#summary(args.id);
  }

  rename(id: string, name: string): PlanSummary {
    return this.#writing(`could not rename the plan to "${name}"`, this.#db.transaction(() => {
      const record = this.get(id);
      if (!record) throw new PlanNotFoundError(id);
      const plan = { ...record.plan, name };
      this.#db
        .prepare('UPDATE plans SET name = ?, plan_json = ?, search_text = ?, updated_at = ? WHERE id = ?')
        .run(name, JSON.stringify(plan), searchText(name, record.notes, record.tags), this.#timestamp(), id);
      return this.#summary(id);
    }));
  }

  duplicate(id: string, name?: string): PlanSummary {
    return this.#writing('could not duplicate the plan', this.#db.transaction(() => {
      const record = this.get(id);
      if (!record) throw new PlanNotFoundError(id);
      return this.#save({ name: name ?? `${record.name} (copy)`, plan: record.plan, result: record.result, notes: record.notes, tags: record.tags });
    }));
  }

  /** Soft delete: the plan leaves the list; the answer is what restore needs. */
  delete(id: string): UndoToken {
    const token = randomUUID();
    const changed = this.#writing('could not delete the plan', () =>
      this.#db.prepare('UPDATE plans SET deleted_at = ?, undo_token = ? WHERE id = ? AND deleted_at IS NULL').run(this.#timestamp(), token, id).changes,
    );
    if (changed === 0) throw new PlanNotFoundError(id);
    return { id, undo_token: token };
  }

  /** Undoes the delete that answered `undo_token` (a restored plan keeps its place: updated_at is not touched). */
  restore({ id, undo_token }: UndoToken): PlanSummary {
    const changed = this.#writing('could not restore the plan', () =>
      this.#db.prepare('UPDATE plans SET deleted_at = NULL, undo_token = NULL WHERE id = ? AND deleted_at IS NOT NULL AND undo_token = ?').run(id, undo_token).changes,
    );
    if (changed === 0) throw new PlanNotFoundError(`${id} awaiting restore with that undo token`);
    return this.#summary(id);
  }

  /** Removes plans deleted more than `PURGE_DELETED_AFTER_MS` ago; returns how many. */
  purgeDeleted(now: Date = this.#now()): number {
    const before = new Date(now.getTime() - PURGE_DELETED_AFTER_MS).toISOString();
    return this.#db.prepare('DELETE FROM plans WHERE deleted_at IS NOT NULL AND deleted_at < ?').run(before).changes;
  }
}

