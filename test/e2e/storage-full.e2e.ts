/// <reference lib="dom" />
/**
 * A full disk while saving, as the user meets it: the save fails with the storage's own words in an error toast, the
 * plan stays in the editor with its edits (still "Unsaved changes"), the version saved before is still the saved one,
 * and once there is room again the same Save goes through.
 *
 * The error is the real one: a PlanStore on a scratch database capped with `PRAGMA max_page_count` (SQLite's
 * SQLITE_FULL, as a full disk gives) is asked to save, and the StorageError it throws is what the bridge's
 * `plans.save` throws while the disk is "full" (test/electron/storage/read-only.test.ts checks the storage side:
 * the refusal, nothing lost, the IPC answer).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { contract } from '../../electron/common/ipc.ts';
import { openDatabase } from '../../electron/main/storage/database.ts';
import { StorageError } from '../../electron/main/storage/errors.ts';
import { PlanStore } from '../../electron/main/storage/plan-store.ts';
import { launchApp, ROOT, waitForResult, type App } from './harness.ts';
import type { ServedWithBridge } from './serve.ts';

let app: App;
let bridge: ServedWithBridge['bridge'];
const PLAN_TEXT = readFileSync(join(ROOT, 'examples/mlp-fp16.plan.json'), 'utf8');

/** The error a save meets on a full disk, from a real PlanStore on a database that may not grow. */
function fullDiskError(dir: string): StorageError {
  const { db } = openDatabase(join(dir, 'full.sqlite'));
  const plans = new PlanStore(db);
  db.pragma(`max_page_count = ${db.pragma('page_count', { simple: true }) as number}`);
  try {
    plans.save(contract['plans:save'].args.parse({ name: 'MLP, edited', plan: JSON.parse(PLAN_TEXT), notes: 'x'.repeat(100_000) }));
  } catch (error) {
    if (error instanceof StorageError) return error;
    throw error;
  } finally {
    db.close();
  }
  throw new Error('the capped database took the save');
}

beforeAll(async () => {
  app = await launchApp();
  bridge = (app.served as ServedWithBridge).bridge;
});
afterAll(async () => {
  await app?.close();
});

describe('a full disk while saving', () => {
  test('says so, keeps the edits in the editor and the saved version saved, and saves once there is room', async () => {
    const { page } = app;
    bridge.queueOpenFile({ name: 'mlp-fp16.plan.json', text: PLAN_TEXT });
    bridge.sendMenuCommand('open-plan');
    await waitForResult(page);
    await page.locator('#plan-title').fill('MLP');
    bridge.sendMenuCommand('save');
    await expect.poll(() => page.locator('[data-testid="save-state"]').textContent()).toBe('Saved');
    const saved = bridge.storage.plans.list().plans;
    expect(saved.map((p) => p.name)).toEqual(['MLP']);

    // The disk fills up.
    const error = fullDiskError(join(bridge.dbPath, '..'));
    expect(error.code).toBe('SQLITE_FULL');
    const realSave = bridge.storage.plans.save.bind(bridge.storage.plans);
    bridge.storage.plans.save = () => {
      throw error;
    };

    await page.locator('#plan-title').fill('MLP, edited');
    bridge.sendMenuCommand('save');
    const toast = page.locator('.toast.error');
    await toast.waitFor();
    const shown = (await toast.textContent()) ?? '';
    console.log(`full disk: the toast says: ${shown.trim()}`);
    expect(shown).toContain('plans.save: could not save "MLP, edited": the disk holding');
    expect(shown).toContain('is full. Free some space and try again; nothing saved before was lost.');
    // The work is still in the editor, unsaved; the saved plan is the version saved before.
    expect(await page.locator('#plan-title').inputValue()).toBe('MLP, edited');
    expect(await page.locator('[data-testid="save-state"]').textContent()).toContain('Unsaved changes');
    expect(bridge.storage.plans.list().plans.map((p) => p.name)).toEqual(['MLP']);
    expect(bridge.calls.filter((c) => c.channel === 'plans:save').map((c) => c.ok)).toEqual([true, false]);

    // Room again: the same Save goes through.
    bridge.storage.plans.save = realSave;
    bridge.sendMenuCommand('save');
    await expect.poll(() => page.locator('[data-testid="save-state"]').textContent()).toBe('Saved');
    expect(bridge.storage.plans.list().plans.map((p) => p.name)).toEqual(['MLP, edited']);
    expect(app.errors.filter((e) => !e.includes('is full'))).toEqual([]);
  });
});
