import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { DatabaseTooNewError, openDatabase } from '../../../electron/main/storage/database.ts';
import { LATEST_VERSION, MIGRATIONS, migrate, userVersion } from '../../../electron/main/storage/migrations.ts';
import { openStorage } from '../../../electron/main/storage/index.ts';
import { PlanStore } from '../../../electron/main/storage/plan-store.ts';
import { resnetPlan, tempDir } from '../helpers.ts';

const FIXED_NOW = () => new Date('2026-11-24T03:40:00.000Z');

function tables(db: Database.Database): string[] {
  return (db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name").all() as { name: string }[]).map((r) => r.name);
}

describe('opening plans.sqlite', () => {
  it('creates an empty database at the latest schema, in WAL mode with foreign keys on, without a backup', () => {
    const dir = tempDir();
    const path = join(dir, 'data', 'plans.sqlite');
    const { db, notices, migrated } = openDatabase(path);
    expect(migrated).toEqual(MIGRATIONS.map((m) => m.version));
    expect(userVersion(db)).toBe(LATEST_VERSION);
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(db.pragma('foreign_keys', { simple: true })).toBe(1);
    expect(tables(db)).toEqual(['comparison_plans', 'comparisons', 'plans', 'snapshots']);
    expect(notices).toEqual([]);
    expect(existsSync(join(dir, 'data', 'backups'))).toBe(false);
    db.close();
  });

  it('migrates a version-1 database with plans in it, after writing a backup that still holds them at version 1', () => {
    const dir = tempDir();
    const path = join(dir, 'plans.sqlite');
    const v1 = openDatabase(path, { migrations: MIGRATIONS.slice(0, 1) });
    const saved = new PlanStore(v1.db).save({ name: 'kept across the migration', plan: resnetPlan(), notes: 'n', tags: ['a'], result: null });
    v1.db.close();

    const { db, notices, migrated } = openDatabase(path, { now: FIXED_NOW });
    expect(migrated).toEqual(MIGRATIONS.slice(1).map((m) => m.version));
    expect(userVersion(db)).toBe(LATEST_VERSION);
    const backupPath = join(dir, 'backups', 'plans-v1-2026-11-24T03-40-00-000Z.sqlite');
    expect(notices).toEqual([{ id: 'database_backed_up', path: backupPath, from_version: 1, to_version: LATEST_VERSION }]);
    expect((db.prepare('SELECT name FROM plans WHERE id = ?').get(saved.id) as { name: string }).name).toBe('kept across the migration');
    db.close();

    const backup = new Database(backupPath, { readonly: true });
    expect(userVersion(backup)).toBe(1);
    expect(tables(backup)).toEqual(['plans']);
    expect((backup.prepare('SELECT count(*) AS n FROM plans').get() as { n: number }).n).toBe(1);
    backup.close();
  });

  it('two databases backed up into one folder in the same millisecond keep both backups (VACUUM INTO refuses a file that exists)', () => {
    const dir = tempDir();
    const backupDir = join(dir, 'backups');
    const paths = ['a.sqlite', 'b.sqlite'].map((name) => join(dir, name));
    for (const path of paths) openDatabase(path, { migrations: MIGRATIONS.slice(0, 1) }).db.close();
    const backups = paths.map((path) => {
      const { db, notices } = openDatabase(path, { now: FIXED_NOW, backupDir });
      expect(userVersion(db)).toBe(LATEST_VERSION);
      db.close();
      return notices.find((n) => n.id === 'database_backed_up');
    });
    expect(backups.map((b) => b && 'path' in b && b.path)).toEqual([
      join(backupDir, 'plans-v1-2026-11-24T03-40-00-000Z.sqlite'),
      join(backupDir, 'plans-v1-2026-11-24T03-40-00-000Z-2.sqlite'),
    ]);
    expect(readdirSync(backupDir).sort()).toEqual(['plans-v1-2026-11-24T03-40-00-000Z-2.sqlite', 'plans-v1-2026-11-24T03-40-00-000Z.sqlite']);
  });

  it('runs each migration in a transaction: a failing step leaves the file at the previous version', () => {
    const dir = tempDir();
    const path = join(dir, 'plans.sqlite');
    openDatabase(path, { migrations: MIGRATIONS.slice(0, 1) }).db.close();
    const broken = [...MIGRATIONS.slice(0, 1), { version: 2, description: 'fails halfway', sql: 'CREATE TABLE half (x INTEGER); SELECT * FROM no_such_table;' }];
    expect(() => openDatabase(path, { migrations: broken })).toThrow(/no_such_table/);
    const db = new Database(path);
    expect(userVersion(db)).toBe(1);
    expect(tables(db)).toEqual(['plans']);
    db.close();
  });

  it('refuses, untouched, a database written by a newer memplan', () => {
    const dir = tempDir();
    const path = join(dir, 'plans.sqlite');
    const db = new Database(path);
    db.pragma(`user_version = ${LATEST_VERSION + 1}`);
    db.exec('CREATE TABLE future (x INTEGER)');
    db.close();
    const before = readFileSync(path);
    expect(() => openDatabase(path)).toThrow(DatabaseTooNewError);
    expect(() => openDatabase(path)).toThrow(/newer memplan .*Update memplan/);
    expect(readFileSync(path).equals(before)).toBe(true);
    expect(readdirSync(dir).filter((f) => f.includes('corrupt'))).toEqual([]);
  });

  it('moves a file that is not a database aside, keeps it byte for byte, and starts a fresh one', () => {
    const dir = tempDir();
    const path = join(dir, 'plans.sqlite');
    const garbage = Buffer.from('this is not an SQLite database, but it is the user\'s file '.repeat(200));
    writeFileSync(path, garbage);
    const { db, notices } = openDatabase(path, { now: FIXED_NOW });
    const movedTo = `${path}.corrupt-2026-11-24T03-40-00-000Z`;
    expect(notices).toEqual([{ id: 'database_recovered', moved_to: movedTo, reason: expect.stringMatching(/not a database/) }]);
    expect(readFileSync(movedTo).equals(garbage)).toBe(true);
    expect(userVersion(db)).toBe(LATEST_VERSION);
    db.close();
  });

  it('moves aside a database whose pages are damaged (quick_check fails), with its WAL', () => {
    const dir = tempDir();
    const path = join(dir, 'plans.sqlite');
    const storage = openStorage(path);
    for (let i = 0; i < 200; i++) storage.plans.save({ name: `plan ${i}`, plan: resnetPlan(i + 1), notes: 'x'.repeat(500), tags: [], result: null });
    storage.close();
    // Overwrite the middle of the file (b-tree pages of `plans`), leaving the header intact.
    const bytes = readFileSync(path);
    const pageSize = bytes.readUInt16BE(16);
    bytes.fill(0x5a, pageSize * 3, pageSize * 6);
    writeFileSync(path, bytes);
    writeFileSync(`${path}-wal`, Buffer.alloc(0));
    const { db, notices } = openDatabase(path, { now: FIXED_NOW });
    expect(notices).toHaveLength(1);
    expect(notices[0]).toMatchObject({ id: 'database_recovered', moved_to: `${path}.corrupt-2026-11-24T03-40-00-000Z` });
    expect(existsSync(`${path}.corrupt-2026-11-24T03-40-00-000Z`)).toBe(true);
    expect((db.prepare('SELECT count(*) AS n FROM plans').get() as { n: number }).n).toBe(0);
    db.close();
  });

  it('six processes opening a new file at once all open it; the migrations run once', async () => {
    // Found by the durability test: both saw version 0 and the second failed with "table plans already exists".
    const script = new URL('./open-once.ts', import.meta.url).pathname;
    for (let round = 0; round < 12; round++) {
      const path = join(tempDir(), 'data', 'plans.sqlite');
      const runs = await Promise.all(
        Array.from({ length: 6 }, () => {
          const child = spawn(process.execPath, [script, path], { stdio: ['ignore', 'pipe', 'pipe'] });
          let out = '';
          child.stdout.on('data', (c: Buffer) => (out += c.toString()));
          child.stderr.on('data', (c: Buffer) => (out += c.toString()));
          return new Promise<{ code: number | null; out: string }>((resolve) => child.on('close', (code) => resolve({ code, out })));
        }),
      );
      for (const r of runs) expect(r, r.out).toMatchObject({ code: 0 });
      const reports = runs.map((r) => JSON.parse(r.out) as { migrated: number[]; plans: number });
      // Every migration applied by exactly one of them.
      expect(reports.flatMap((r) => r.migrated).sort((a, b) => a - b)).toEqual(MIGRATIONS.map((m) => m.version));
      const db = new Database(path);
      expect(userVersion(db)).toBe(LATEST_VERSION);
      expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
      db.close();
    }
  });

  it('migrate() applies nothing to a database already at the latest version', () => {
    const { db } = openDatabase(join(tempDir(), 'plans.sqlite'));
    expect(migrate(db)).toEqual([]);
    db.close();
  });
});
