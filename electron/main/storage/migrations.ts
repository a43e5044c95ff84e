/**
 * The database's schema, one numbered step at a time. `PRAGMA user_version` holds the last step applied; each step
 * runs in a transaction with the version bump, so a failed step leaves the file as it was. Steps are never edited
 * once released: a change is a new step.
 */
import type Database from 'better-sqlite3';

export interface Migration {
  version: number;
  description: string;
  sql: string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: 'plans: the plan file, its latest result, name, notes, tags, timestamps, soft delete',
    sql: `
      CREATE TABLE plans (
        id          TEXT PRIMARY KEY,            -- a UUID
        name        TEXT NOT NULL,
        notes       TEXT NOT NULL DEFAULT '',
        tags_json   TEXT NOT NULL DEFAULT '[]',  -- a JSON array of strings
        search_text TEXT NOT NULL DEFAULT '',    -- name, notes and tags, lower-cased (plans.list's query)
        plan_json   TEXT NOT NULL,               -- the plan file as the user has it
        plan_valid  INTEGER NOT NULL,            -- 1: it passes the engine's plan schema
        result_json TEXT,                        -- the latest engine result (engine/result/), or NULL
        result_kind TEXT,                        -- its kind: simulate, max_batch, ...
        result_version INTEGER,                  -- its schema_version (engine/result/version.ts)
        result_fits INTEGER,                     -- what the list shows without reading result_json
        result_peak_reserved_bytes INTEGER,
        result_max_batch INTEGER,
        created_at  TEXT NOT NULL,               -- ISO 8601, UTC
        updated_at  TEXT NOT NULL,
        deleted_at  TEXT,                        -- soft delete: NULL while the plan is listed
        undo_token  TEXT                         -- what restore must present to undo that delete
      ) STRICT;
      CREATE INDEX plans_listed ON plans (deleted_at, updated_at DESC);
    `,
  },
  {
    version: 2,
    description: 'comparisons (a name and an ordered list of plans) and PyTorch memory snapshots attached to plans',
    sql: `
      CREATE TABLE comparisons (
        id         TEXT PRIMARY KEY,
        name       TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        deleted_at TEXT
      ) STRICT;
      CREATE TABLE comparison_plans (
        comparison_id TEXT NOT NULL REFERENCES comparisons (id) ON DELETE CASCADE,
        position      INTEGER NOT NULL,          -- 0, 1, ...: the column order
        plan_id       TEXT NOT NULL REFERENCES plans (id) ON DELETE CASCADE,
        PRIMARY KEY (comparison_id, position)
      ) STRICT;
      CREATE INDEX comparison_plans_by_plan ON comparison_plans (plan_id);
      CREATE TABLE snapshots (
        id          TEXT PRIMARY KEY,
        plan_id     TEXT REFERENCES plans (id) ON DELETE CASCADE,
        name        TEXT NOT NULL,               -- the file's name as opened
        size_bytes  INTEGER NOT NULL,
        sha256      TEXT NOT NULL,
        bytes       BLOB NOT NULL,               -- the snapshot as opened (pickle, gzipped or not)
        result_json TEXT,                        -- its latest replay result, or NULL
        result_version INTEGER,
        created_at  TEXT NOT NULL
      ) STRICT;
      CREATE INDEX snapshots_by_plan ON snapshots (plan_id);
    `,
  },
  {
    version: 3,
    description: 'comparisons: which version of each plan was compared (its updated_at when the comparison was saved), listed newest first',
    sql: `
      -- A plan edited after the comparison was saved is shown as it is now, and the comparison says so.
      ALTER TABLE comparison_plans ADD COLUMN plan_updated_at TEXT NOT NULL DEFAULT '';
      CREATE INDEX comparisons_listed ON comparisons (deleted_at, updated_at DESC);
    `,
  },
  {
    version: 4,
    description: 'snapshots attached to plans: stored gzipped, with the cap they were replayed under and their peaks for the list',
    sql: `
      -- From here on, snapshots.bytes is always gzip (a pickle compresses about 10:1) and size_bytes the file as
      -- opened; the attachment survives the original file moving or being deleted. One file per plan once.
      ALTER TABLE snapshots ADD COLUMN stored_bytes INTEGER NOT NULL DEFAULT 0;  -- length of the gzipped blob
      ALTER TABLE snapshots ADD COLUMN memory_limit_bytes INTEGER;              -- the cap replayed under, or NULL
      ALTER TABLE snapshots ADD COLUMN events INTEGER;                          -- trace events
      ALTER TABLE snapshots ADD COLUMN real_peak_allocated_bytes INTEGER;
      ALTER TABLE snapshots ADD COLUMN real_peak_reserved_bytes INTEGER;
      CREATE UNIQUE INDEX snapshots_plan_file ON snapshots (plan_id, sha256);
    `,
  },
  {
    version: 5,
    description: 'comparisons deleted with an undo token, as plans are, and purged after the same undo period',
    sql: `
      ALTER TABLE comparisons ADD COLUMN undo_token TEXT;
    `,
  },
];

export const LATEST_VERSION = MIGRATIONS[MIGRATIONS.length - 1]!.version;

export function userVersion(db: Database.Database): number {
  return db.pragma('user_version', { simple: true }) as number;
}

/**
 * Applies the steps after the database's version, each in its own transaction. Returns the versions applied.
 * Each transaction is IMMEDIATE and reads the version inside it: two processes opening a new file at once (a second
 * app version, the durability test's writers) would otherwise both see version 0 and the second would fail with
 * "table plans already exists"; this way the second waits for the first's commit (the busy timeout) and skips.
 */
export function migrate(db: Database.Database, migrations: readonly Migration[] = MIGRATIONS): number[] {
  const applied: number[] = [];
  for (const migration of migrations) {
    if (migration.version <= userVersion(db)) continue;
    const ran = db
      .transaction(() => {
        if (migration.version <= userVersion(db)) return false;
        db.exec(migration.sql);
        db.pragma(`user_version = ${migration.version}`);
        return true;
      })
      .immediate();
    if (ran) applied.push(migration.version);
  }
  return applied;
}
