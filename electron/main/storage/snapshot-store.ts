/**
 * PyTorch memory snapshots attached to saved plans (table `snapshots`, migrations 2 and 4): "what the GPU did" kept
 * beside "what memplan predicted". The file's bytes are stored, gzipped, not its path: the attachment must survive
 * the original file being moved or deleted (a recording usually lives in a scratch folder of a training machine).
 * A pickle compresses about 10:1, so MAX_ATTACHED_SNAPSHOT_BYTES of gzip holds a recording of a GB or more.
 *
 * Arguments arrive validated by the IPC contract; rows read back are validated again (a damaged row is a
 * `RowProblem` in the list, not a crash). Deleting a plan for good removes its snapshots (ON DELETE CASCADE).
 */
import { createHash, randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import type Database from 'better-sqlite3';
import { z } from 'zod';
import { describeIssues, MAX_ATTACHED_SNAPSHOT_BYTES, resultJsonSchema, type ParsedArgs, type RowProblem, type SnapshotRecord, type SnapshotSummary } from '../../common/ipc.ts';
import { resultJsonReplacer, resultProblem } from './engine-checks.ts';
import { PlanArgumentError, PlanNotFoundError } from './plan-store.ts';

const gzipAsync = promisify(gzip);

/** No snapshot with that id: the handlers answer `not_found`. */
export class SnapshotNotFoundError extends Error {
  readonly code = 'not_found';
  constructor(id: string) {
    super(`no attached snapshot with id ${id}`);
    this.name = 'SnapshotNotFoundError';
  }
}

const SUMMARY_COLUMNS =
  'id, plan_id, name, size_bytes, stored_bytes, sha256, memory_limit_bytes, events, real_peak_allocated_bytes, real_peak_reserved_bytes, created_at';

const summaryRowSchema = z.object({
  id: z.uuid(),
  plan_id: z.uuid(),
  name: z.string(),
  size_bytes: z.number().int().nonnegative(),
  stored_bytes: z.number().int().nonnegative(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/, 'is not a SHA-256'),
  memory_limit_bytes: z.number().int().positive().nullable(),
  events: z.number().int().nonnegative().nullable(),
  real_peak_allocated_bytes: z.number().int().nonnegative().nullable(),
  real_peak_reserved_bytes: z.number().int().nonnegative().nullable(),
  created_at: z.iso.datetime(),
});

type Read<T> = { ok: true; value: T } | { ok: false; problem: RowProblem };

function readSummary(row: Record<string, unknown>): Read<SnapshotSummary> {
  const parsed = summaryRowSchema.safeParse(row);
  if (parsed.success) return { ok: true, value: parsed.data };
  return { ok: false, problem: { id: String(row['id']), message: `attached snapshot ${String(row['id'])} (${JSON.stringify(String(row['name']))}) could not be read: ${describeIssues(parsed.error)}` } };
}

function isGzip(bytes: Uint8Array): boolean {
  return bytes.length >= 2 && bytes[0] === 0x1f && bytes[1] === 0x8b;
}

function number(value: unknown): number | null {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : null;
}

export interface SnapshotStoreOptions {
  now?: () => Date;
  newId?: () => string;
}

export class SnapshotStore {
  readonly #db: Database.Database;
  readonly #now: () => Date;
  readonly #newId: () => string;

  constructor(db: Database.Database, options: SnapshotStoreOptions = {}) {
    this.#db = db;
    this.#now = options.now ?? (() => new Date());
    this.#newId = options.newId ?? randomUUID;
  }

  #planExists(planId: string): boolean {
    return this.#db.prepare('SELECT 1 FROM plans WHERE id = ? AND deleted_at IS NULL').get(planId) !== undefined;
  }

  #summary(id: string): SnapshotSummary {
    const row = this.#db.prepare(`SELECT ${SUMMARY_COLUMNS} FROM snapshots WHERE id = ?`).get(id) as Record<string, unknown> | undefined;
    if (!row) throw new SnapshotNotFoundError(id);
    const read = readSummary(row);
    if (!read.ok) throw new Error(read.problem.message);
    return read.value;
  }

  /** Stores the file gzipped with its replay result; the same file on the same plan replaces the earlier one. */
  async attach(args: ParsedArgs<'snapshots:attach'>): Promise<SnapshotSummary> {
    if (!this.#planExists(args.plan_id)) throw new PlanNotFoundError(args.plan_id);
    if (args.result.kind !== 'replay') throw new PlanArgumentError('result.kind: must be replay');
    const problem = resultProblem(args.result);
    if (problem !== null) throw new PlanArgumentError(problem);
    const file = new Uint8Array(args.bytes);
    const sha256 = createHash('sha256').update(file).digest('hex');
    // gzip off the main thread's event loop (libuv's pool): a 500 MB pickle takes seconds
    const stored = isGzip(file) ? file : new Uint8Array(await gzipAsync(file, { level: 6 }));
    if (stored.length > MAX_ATTACHED_SNAPSHOT_BYTES) {
      throw new PlanArgumentError(
        `bytes: the snapshot is ${stored.length} bytes gzipped; memplan stores snapshots of at most ${MAX_ATTACHED_SNAPSHOT_BYTES} bytes gzipped`,
      );
    }
    if (!this.#planExists(args.plan_id)) throw new PlanNotFoundError(args.plan_id); // deleted while compressing
    const result = args.result;
    const columns = {
      plan_id: args.plan_id,
      name: args.name,
      size_bytes: file.length,
      stored_bytes: stored.length,
      sha256,
      bytes: Buffer.from(stored.buffer, stored.byteOffset, stored.byteLength),
      result_json: JSON.stringify(result, resultJsonReplacer),
      result_version: result.schema_version,
      memory_limit_bytes: args.memory_limit_bytes,
      events: number(result['events']),
      real_peak_allocated_bytes: number(result['real_peak_allocated_bytes']),
      real_peak_reserved_bytes: number(result['real_peak_reserved_bytes']),
      created_at: this.#now().toISOString(),
    };
    const id = this.#db.transaction(() => {
      const existing = this.#db.prepare('SELECT id FROM snapshots WHERE plan_id = ? AND sha256 = ?').get(args.plan_id, sha256) as { id: string } | undefined;
      if (existing) {
        this.#db
          .prepare(
            `UPDATE snapshots SET name = @name, size_bytes = @size_bytes, stored_bytes = @stored_bytes, bytes = @bytes, result_json = @result_json,
               result_version = @result_version, memory_limit_bytes = @memory_limit_bytes, events = @events,
               real_peak_allocated_bytes = @real_peak_allocated_bytes, real_peak_reserved_bytes = @real_peak_reserved_bytes, created_at = @created_at
             WHERE id = @id`,
          )
          .run({ id: existing.id, ...columns });
        return existing.id;
      }
      const newId = this.#newId();
      this.#db
        .prepare(
          `INSERT INTO snapshots (id, plan_id, name, size_bytes, stored_bytes, sha256, bytes, result_json, result_version, memory_limit_bytes,
             events, real_peak_allocated_bytes, real_peak_reserved_bytes, created_at)
           VALUES (@id, @plan_id, @name, @size_bytes, @stored_bytes, @sha256, @bytes, @result_json, @result_version, @memory_limit_bytes,
             @events, @real_peak_allocated_bytes, @real_peak_reserved_bytes, @created_at)`,
        )
        .run({ id: newId, ...columns });
      return newId;
    })();
    return this.#summary(id);
  }

  /** The snapshots attached to a plan, newest first; a row that cannot be read is a problem, not an error. */
  list(planId: string): { snapshots: SnapshotSummary[]; problems: RowProblem[] } {
    const rows = this.#db.prepare(`SELECT ${SUMMARY_COLUMNS} FROM snapshots WHERE plan_id = ? ORDER BY created_at DESC, rowid DESC`).all(planId) as Record<string, unknown>[];
    const out: { snapshots: SnapshotSummary[]; problems: RowProblem[] } = { snapshots: [], problems: [] };
    for (const row of rows) {
      const read = readSummary(row);
      if (read.ok) out.snapshots.push(read.value);
      else out.problems.push(read.problem);
    }
    return out;
  }

  /** The snapshot with its stored (gzipped) bytes and result; null if there is none. */
  get(id: string): SnapshotRecord | null {
    const row = this.#db.prepare(`SELECT ${SUMMARY_COLUMNS}, bytes, result_json FROM snapshots WHERE id = ?`).get(id) as Record<string, unknown> | undefined;
    if (!row) return null;
    const summary = readSummary(row);
    if (!summary.ok) throw new Error(summary.problem.message);
    const blob = row['bytes'];
    if (!(blob instanceof Uint8Array)) throw new Error(`attached snapshot ${id}: bytes: is not a blob`);
    let result: SnapshotRecord['result'] = null;
    if (typeof row['result_json'] === 'string') {
      let value: unknown;
      try {
        value = JSON.parse(row['result_json']);
      } catch {
        value = undefined;
      }
      const parsed = resultJsonSchema.safeParse(value);
      // a result of an older schema the engine no longer reads: the renderer replays the bytes again
      result = parsed.success && resultProblem(parsed.data) === null ? parsed.data : null;
    }
    const bytes = blob.buffer.slice(blob.byteOffset, blob.byteOffset + blob.byteLength) as ArrayBuffer;
    return { ...summary.value, bytes, result };
  }

  detach(id: string): { id: string } {
    const changed = this.#db.prepare('DELETE FROM snapshots WHERE id = ?').run(id).changes;
    if (changed === 0) throw new SnapshotNotFoundError(id);
    return { id };
  }
}
