/**
 * Opening plans.sqlite defensively (the VS Code storage habit: check, back up, recover, say so).
 *
 * 1. Open and check: `PRAGMA quick_check`. A file that is not a database, or fails the check, is moved aside
 *    (`plans.sqlite.corrupt-<time>`, with its -wal and -shm), never deleted, and a fresh database is created; the
 *    notice `database_recovered` tells the user where the old file went.
 * 2. A database written by a newer memplan (user_version above ours) is refused, untouched: DatabaseTooNewError.
 * 3. Before migrating a database that already has a schema, a consistent copy is written with `VACUUM INTO`
 *    (`backups/plans-v<from>-<time>.sqlite`; notice `database_backed_up`).
 * 4. WAL, foreign keys, migrations (migrations.ts), synchronous=NORMAL (safe with WAL: a power cut
 *    can lose the last transactions, never corrupt the file).
 * 0. Before all that: the folder and the files must be writable. SQLite would open a read-only file read-only and
 *    create its -shm beside it with the file's read-only mode, which then blocks the next open even after the user
 *    has made the file writable again; so a read-only file or folder is refused first, touching nothing
 *    (errors.ts words it).
 */
import { accessSync, constants, existsSync, mkdirSync, renameSync } from 'node:fs';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import type { StorageNotice } from '../../common/ipc.ts';
import { LATEST_VERSION, MIGRATIONS, migrate, userVersion, type Migration } from './migrations.ts';

/** How long a statement waits for a lock held by another connection (a second app instance) before failing. */
const BUSY_TIMEOUT_MS = 5000;

export class DatabaseTooNewError extends Error {
  readonly path: string;
  readonly version: number;
  constructor(path: string, version: number) {
    super(`${path} was written by a newer memplan (schema ${version}; this one knows up to ${LATEST_VERSION}). Update memplan to open it.`);
    this.name = 'DatabaseTooNewError';
    this.path = path;
    this.version = version;
  }
}

export interface OpenedDatabase {
  db: Database.Database;
  path: string;
  /** What the user should be told (recovered, backed up). */
  notices: StorageNotice[];
  /** The schema versions applied on this open. */
  migrated: number[];
}

export interface OpenOptions {
  /** Where migration backups go (default: `backups/` beside the database). */
  backupDir?: string;
  /** Test seams. */
  now?: () => Date;
  migrations?: readonly Migration[];
}

/** `2026-11-24T03-40-00-000Z`: a time that sorts and is a valid file name on every OS. */
function fileStamp(date: Date): string {
  return date.toISOString().replace(/[:.]/g, '-');
}

/** SQLite's answer for a file that is damaged or not a database at all. */
function isCorruption(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return code === 'SQLITE_CORRUPT' || code === 'SQLITE_NOTADB' || (typeof code === 'string' && code.startsWith('SQLITE_CORRUPT'));
}

/**
 * `PRAGMA journal_mode = WAL`, retried while another connection holds the lock it needs: SQLite answers SQLITE_BUSY
 * at once, without the busy handler, when that would deadlock (two processes opening a new file at once).
 * A file already in WAL mode needs no lock.
 */
function enableWal(db: Database.Database): void {
  const deadline = Date.now() + BUSY_TIMEOUT_MS;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    try {
      db.pragma('journal_mode = WAL');
      return;
    } catch (error) {
      if ((error as { code?: unknown }).code !== 'SQLITE_BUSY' || Date.now() > deadline) throw error;
      Atomics.wait(pause, 0, 0, 10);
    }
  }
}

/** Opens the file and checks it; throws on corruption (a failed check included) so the caller can move it aside. */
function openChecked(path: string): Database.Database {
  const db = new Database(path, { timeout: BUSY_TIMEOUT_MS });
  try {
    const check = db.pragma('quick_check', { simple: true });
    if (check !== 'ok') throw Object.assign(new Error(`quick_check: ${String(check)}`), { code: 'SQLITE_CORRUPT' });
    return db;
  } catch (error) {
    db.close();
    throw error;
  }
}

function moveAside(path: string, stamp: string): string {
  const target = `${path}.corrupt-${stamp}`;
  try {
    renameSync(path, target);
  } catch (error) {
    // another process that found it damaged moved it aside first (with its WAL and index): nothing left to move
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return target;
    throw error;
  }
  for (const suffix of ['-wal', '-shm']) {
    try {
      renameSync(path + suffix, target + suffix);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error; // none, or another process's close took it
    }
  }
  return target;
}

/**
 * Throws EACCES/EROFS (Node's error) when the folder or an existing database file may not be written. A file that
 * is gone by the time it is checked is no obstacle: another process's last connection deletes the WAL and its index
 * when it closes (found by the six-process opening test: ENOENT on plans.sqlite-wal between existsSync and access).
 */
function checkWritable(path: string): void {
  accessSync(dirname(path), constants.W_OK | constants.X_OK);
  for (const file of [path, `${path}-wal`, `${path}-shm`]) {
    try {
      accessSync(file, constants.R_OK | constants.W_OK);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
}

function hasSchema(db: Database.Database): boolean {
  return userVersion(db) > 0 || (db.prepare('SELECT count(*) AS n FROM sqlite_schema').get() as { n: number }).n > 0;
}

export function openDatabase(path: string, options: OpenOptions = {}): OpenedDatabase {
  const now = options.now ?? (() => new Date());
  const migrations = options.migrations ?? MIGRATIONS;
  const latest = migrations[migrations.length - 1]?.version ?? 0;
  const notices: StorageNotice[] = [];
  mkdirSync(dirname(path), { recursive: true });
  checkWritable(path);

  let db: Database.Database;
  try {
    db = openChecked(path);
  } catch (error) {
    if (!isCorruption(error)) throw error;
    const movedTo = moveAside(path, fileStamp(now()));
    notices.push({ id: 'database_recovered', moved_to: movedTo, reason: (error as Error).message });
    db = openChecked(path);
  }

  try {
    const version = userVersion(db);
    if (version > latest) throw new DatabaseTooNewError(path, version);
    // Only now: switching to WAL rewrites the header, and a newer app's file must stay as it was.
    enableWal(db);
    if (version < latest && hasSchema(db)) {
      const backupDir = options.backupDir ?? join(dirname(path), 'backups');
      mkdirSync(backupDir, { recursive: true });
      // Processes opening the file at once can back it up in the same millisecond: VACUUM INTO refuses a file that
      // exists ("table plans already exists"), so the second takes the next free name.
      const stamp = fileStamp(now());
      let backup = join(backupDir, `plans-v${version}-${stamp}.sqlite`);
      for (let n = 2; existsSync(backup); n++) backup = join(backupDir, `plans-v${version}-${stamp}-${n}.sqlite`);
      try {
        db.prepare('VACUUM INTO ?').run(backup);
      } catch (error) {
        if (!existsSync(backup)) throw error;
        backup = join(backupDir, `plans-v${version}-${stamp}-${process.pid}.sqlite`);
        db.prepare('VACUUM INTO ?').run(backup);
      }
      notices.push({ id: 'database_backed_up', path: backup, from_version: version, to_version: latest });
    }
    // foreign_keys cannot change inside a transaction: set it before the migrations run theirs.
    db.pragma('foreign_keys = ON');
    db.pragma('synchronous = NORMAL');
    const migrated = migrate(db, migrations);
    return { db, path, notices, migrated };
  } catch (error) {
    db.close();
    throw error;
  }
}

