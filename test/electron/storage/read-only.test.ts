/**
 * A disk that says no loses nothing and says so in words.
 *
 * - At start-up, a read-only database file, a read-only folder holding one, and a read-only folder with none yet:
 *   openStorage throws a StorageError naming the file, saying it is read-only and that nothing was changed; the file's
 *   bytes are the same after; made writable again, it opens with every plan. File modes do not bind root, so when
 *   the test runs as root each scenario (read-only-scenario.ts) runs as root without the capabilities that override
 *   them (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER, dropped by util-linux's setpriv): the test's files are
 *   root's, so their owner bits decide. Another user would do too, but could not reach a clone in a 0700 folder (a
 *   mktemp -d), the Node binary npm installed there included.
 * - During a save, a full disk: simulated with SQLite's `PRAGMA max_page_count` (the database may not grow past its
 *   size, which SQLite reports as SQLITE_FULL, "database or disk is full", as it does for a full disk). The save is
 *   refused with a StorageError, through the IPC handler as `plans.save: could not save "...": the disk holding ...
 *   is full`, every plan saved before is intact (an update refused leaves the old version), and once there is room
 *   the same save succeeds.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { contract, MAX_NOTES_CHARS } from '../../../electron/common/ipc.ts';
import { dispatch } from '../../../electron/main/handlers/dispatch.ts';
import { createHandlers, type Dialogs } from '../../../electron/main/handlers/handlers.ts';
import { isAppUrl } from '../../../electron/main/security/origin.ts';
import { ComparisonStore } from '../../../electron/main/storage/comparison-store.ts';
import { openDatabase } from '../../../electron/main/storage/database.ts';
import { StorageError } from '../../../electron/main/storage/errors.ts';
import { PlanStore } from '../../../electron/main/storage/plan-store.ts';
import { SnapshotStore } from '../../../electron/main/storage/snapshot-store.ts';
import { resnetPlan, tempDir } from '../helpers.ts';

const SCENARIO = join(import.meta.dirname, 'read-only-scenario.ts');
const asRoot = process.getuid?.() === 0;
/** The capabilities that let root ignore file modes, dropped for the scenario's process when the test runs as root. */
const DROP = '-dac_override,-dac_read_search,-fowner';

describe('a read-only file or folder at start-up', () => {
  it.each(['readonly-file', 'readonly-folder', 'readonly-folder-new'])('%s: a clear error, nothing changed, everything there once writable', (scenario) => {
    const folder = tempDir();
    chmodSync(folder, 0o777);
    const node = [process.execPath, SCENARIO, folder, scenario];
    const [command, ...args] = asRoot ? ['setpriv', `--inh-caps=${DROP}`, `--ambient-caps=${DROP}`, `--bounding-set=${DROP}`, ...node] : node;
    const run = spawnSync(command!, args, { encoding: 'utf8', timeout: 30_000 });
    expect(run.error).toBeUndefined();
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    const r = JSON.parse(run.stdout) as { uid: number; overrides: boolean; path: string; error: { name: string; code: string; message: string } | null; before: string | null; after: string | null; names: string[] };
    console.log(`read-only start-up (${scenario}), run as uid ${r.uid}${asRoot ? ' without CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH and CAP_FOWNER (file modes bind root only so)' : ''}: ${r.error?.message}`);
    if (asRoot) expect(r.overrides).toBe(false);
    expect(r.error).toMatchObject({ name: 'StorageError', code: expect.stringMatching(/^(EACCES|EROFS|EPERM|SQLITE_READONLY|SQLITE_CANTOPEN)/) });
    expect(r.error!.message).toContain(r.path);
    expect(r.error!.message).toMatch(/^memplan cannot open its database of saved plans: .* (is read-only|cannot be opened for writing)/);
    expect(r.error!.message).toMatch(/nothing saved before was changed/i);
    expect(r.after).toBe(r.before);
    expect(r.names).toEqual(scenario === 'readonly-folder-new' ? [] : ['kept 32', 'kept 64']);
  });
});

describe('a full disk during a save (PRAGMA max_page_count)', () => {
  function open() {
    const path = join(tempDir(), 'plans.sqlite');
    const { db } = openDatabase(path);
    const plans = new PlanStore(db);
    const handlers = createHandlers({
      plans,
      comparisons: new ComparisonStore(db, plans),
      snapshots: new SnapshotStore(db),
      // No file dialog is used here: every call would be a failure of the test.
      dialogs: new Proxy({} as Dialogs, { get: () => () => Promise.reject(new Error('no dialog in this test')) }),
      info: () => ({ name: 'memplan', version: '0.1.0', electron_version: null, platform: 'linux', data_dir: '/d', database_path: path, notices: [] }),
    });
    const save = (args: unknown) => dispatch(handlers, 'plans:save', args, { url: 'app://memplan/index.html' }, isAppUrl);
    /** The database may not grow: the disk is full. */
    const fill = () => db.pragma(`max_page_count = ${db.pragma('page_count', { simple: true }) as number}`);
    const makeRoom = () => db.pragma('max_page_count = 1073741823');
    return { db, path, plans, save, fill, makeRoom };
  }
  /** Notes as long as allowed: a save that needs pages the full disk does not have. */
  const big = 'x'.repeat(MAX_NOTES_CHARS);

  it('refuses the save in words, through the IPC handler too, and keeps every plan saved before', async () => {
    const { db, path, plans, save, fill, makeRoom } = open();
    const kept = [1, 2, 3].map((i) => plans.save(contract['plans:save'].args.parse({ name: `kept ${i}`, plan: resnetPlan(32 * i), notes: `note ${i}` })));
    fill();

    const refused = (() => {
      try {
        plans.save(contract['plans:save'].args.parse({ name: 'new', plan: resnetPlan(), notes: big }));
      } catch (error) {
        return error;
      }
      return null;
    })();
    expect(refused).toBeInstanceOf(StorageError);
    expect(refused).toMatchObject({ code: 'SQLITE_FULL', path });
    expect((refused as Error).message).toBe(`could not save "new": the disk holding ${path} is full. Free some space and try again; nothing saved before was lost.`);

    // The renderer gets it as the verb's error: it shows the message and leaves the plan in the editor, unsaved.
    const answer = await save({ name: 'new', plan: resnetPlan(), notes: big });
    expect(answer).toEqual({ ok: false, error: { code: 'failed', message: `plans.save: could not save "new": the disk holding ${path} is full. Free some space and try again; nothing saved before was lost.` } });

    // An update refused leaves the version saved before.
    const update = await save({ id: kept[0]!.id, name: 'kept 1, edited', plan: resnetPlan(256), notes: big });
    expect(update).toMatchObject({ ok: false, error: { code: 'failed', message: expect.stringContaining('is full') } });
    expect(plans.get(kept[0]!.id)).toMatchObject({ name: 'kept 1', notes: 'note 1', plan: { training: { batch_size: 32 } } });
    expect(plans.list().plans.map((p) => p.name).sort()).toEqual(['kept 1', 'kept 2', 'kept 3']);
    expect(db.pragma('integrity_check', { simple: true })).toBe('ok');

    // Room again: the same save goes through.
    makeRoom();
    expect(await save({ name: 'new', plan: resnetPlan(), notes: big })).toMatchObject({ ok: true, value: { name: 'new' } });
    expect(plans.list().plans).toHaveLength(4);
    db.close();
  });

  it('refuses a duplicate in words too, leaving the original alone', () => {
    const { db, plans, fill } = open();
    const kept = plans.save(contract['plans:save'].args.parse({ name: 'kept', plan: resnetPlan(), notes: big }));
    fill();
    expect(() => plans.duplicate(kept.id)).toThrow(/^could not duplicate the plan: the disk holding .* is full/);
    expect(plans.list().plans.map((p) => p.name)).toEqual(['kept']);
    expect(plans.get(kept.id)?.notes).toBe(big);
    expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
    db.close();
  });
});
