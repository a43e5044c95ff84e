/**
 * Saved comparisons through the IPC verbs (the same dispatch the main process uses), against a real SQLite file:
 * saved in order, reopened as saved, a plan edited or deleted since says so, bad arguments name their field, a
 * database from before the comparisons' migration keeps its plans and gains the column.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { beforeEach, describe, expect, it } from 'vitest';
import type { ChannelResult, InvokeChannel, IpcAnswer, PlanSummary } from '../../../electron/common/ipc.ts';
import { dispatch } from '../../../electron/main/handlers/dispatch.ts';
import { createHandlers, type Dialogs } from '../../../electron/main/handlers/handlers.ts';
import { isAppUrl } from '../../../electron/main/security/origin.ts';
import { openStorage, type Storage } from '../../../electron/main/storage/index.ts';
import { LATEST_VERSION, MIGRATIONS, userVersion } from '../../../electron/main/storage/migrations.ts';
import { mlpPlan, resnetPlan, tempDir } from '../helpers.ts';

let storage: Storage;
let path: string;
let clock: number;
let call: <C extends InvokeChannel>(channel: C, args?: unknown) => Promise<IpcAnswer<ChannelResult<C>>>;

const noDialogs = new Proxy({}, { get: () => () => Promise.reject(new Error('no dialog in this test')) }) as Dialogs;

function open(): void {
  storage = openStorage(path, { now: () => new Date((clock += 1000)) });
  const handlers = createHandlers({ plans: storage.plans, comparisons: storage.comparisons, snapshots: storage.snapshots, dialogs: noDialogs, info: () => { throw new Error('unused'); } });
  call = (channel, args) => dispatch(handlers, channel, args, { url: 'app://memplan/index.html' }, isAppUrl) as never;
}

async function value<C extends InvokeChannel>(channel: C, args?: unknown): Promise<ChannelResult<C>> {
  const answer = await call(channel, args);
  if (!answer.ok) throw new Error(answer.error.message);
  return answer.value;
}

async function error(channel: InvokeChannel, args: unknown): Promise<{ code: string; message: string }> {
  const answer = await call(channel, args);
  if (answer.ok) throw new Error(`${channel} accepted ${JSON.stringify(args)}`);
  return answer.error;
}

let a: PlanSummary;
let b: PlanSummary;
let c: PlanSummary;

beforeEach(async () => {
  clock = Date.parse('2026-11-24T03:00:00.000Z');
  path = join(tempDir(), 'plans.sqlite');
  open();
  a = await value('plans:save', { name: 'A: fp32', plan: mlpPlan(64) });
  b = await value('plans:save', { name: 'B: batch 32', plan: mlpPlan(32) });
  c = await value('plans:save', { name: 'C: ResNet', plan: resnetPlan() });
  return () => storage.close();
});

describe('saved comparisons', () => {
  it('saves a name and plans in order, and reopens them as saved, after the database is closed and opened again', async () => {
    const saved = await value('comparisons:save', { name: '  batch sizes ', plan_ids: [c.id, a.id, b.id] });
    expect(saved).toMatchObject({ name: 'batch sizes', plan_ids: [c.id, a.id, b.id] });
    storage.close();
    open();
    const record = (await value('comparisons:get', { id: saved.id }))!;
    expect(record.name).toBe('batch sizes');
    expect(record.plans.map((p) => [p.plan_id, p.status, p.plan?.name])).toEqual([
      [c.id, 'current', 'C: ResNet'],
      [a.id, 'current', 'A: fp32'],
      [b.id, 'current', 'B: batch 32'],
    ]);
    expect(record.plans[1]!.plan!.plan).toMatchObject({ training: { batch_size: 64 } });
    expect(record.plans[1]!.compared_updated_at).toBe(a.updated_at);
    expect((await value('comparisons:list')).comparisons.map((x) => x.id)).toEqual([saved.id]);
  });

  it('a plan edited since shows its current version and says so; a deleted one says it is gone', async () => {
    const saved = await value('comparisons:save', { name: 'edits', plan_ids: [a.id, b.id, c.id] });
    await value('plans:save', { id: b.id, name: 'B: batch 16', plan: mlpPlan(16) });
    await value('plans:delete', { id: c.id });
    const record = (await value('comparisons:get', { id: saved.id }))!;
    expect(record.plans.map((p) => p.status)).toEqual(['current', 'edited', 'deleted']);
    expect(record.plans[1]!.plan).toMatchObject({ name: 'B: batch 16', plan: { training: { batch_size: 16 } } });
    expect(record.plans[2]!.plan).toBeNull();
    // Saving the comparison again records the versions as they are now.
    const again = await value('comparisons:save', { id: saved.id, name: 'edits', plan_ids: [b.id, a.id] });
    expect(again.plan_ids).toEqual([b.id, a.id]);
    expect((await value('comparisons:get', { id: saved.id }))!.plans.map((p) => [p.plan?.name, p.status])).toEqual([
      ['B: batch 16', 'current'],
      ['A: fp32', 'current'],
    ]);
  });

  it('renames and reorders in place, deletes, and lists newest first', async () => {
    const first = await value('comparisons:save', { name: 'first', plan_ids: [a.id, b.id] });
    const second = await value('comparisons:save', { name: 'second', plan_ids: [b.id, c.id] });
    expect((await value('comparisons:list')).comparisons.map((x) => x.name)).toEqual(['second', 'first']);
    const renamed = await value('comparisons:save', { id: first.id, name: 'first, reordered', plan_ids: [b.id, a.id, c.id] });
    expect(renamed).toMatchObject({ id: first.id, plan_ids: [b.id, a.id, c.id], created_at: first.created_at });
    expect((await value('comparisons:list')).comparisons.map((x) => x.name)).toEqual(['first, reordered', 'second']);
    expect(await value('comparisons:delete', { id: second.id })).toMatchObject({ id: second.id, undo_token: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    expect((await value('comparisons:list')).comparisons.map((x) => x.name)).toEqual(['first, reordered']);
    expect(await value('comparisons:get', { id: second.id })).toBeNull();
    expect(await error('comparisons:delete', { id: second.id })).toMatchObject({ code: 'not_found' });
    // The plans themselves are untouched.
    expect((await value('plans:list')).plans).toHaveLength(3);
  });

  it('undoes a delete with its token only, in its place, with its plans; purges it after the undo period', async () => {
    const first = await value('comparisons:save', { name: 'first', plan_ids: [a.id, b.id] });
    const second = await value('comparisons:save', { name: 'second', plan_ids: [c.id, b.id, a.id] });
    const token = await value('comparisons:delete', { id: first.id });
    // another delete's token, a made-up one, a live comparison: refused, nothing restored
    const other = await value('comparisons:delete', { id: second.id });
    expect(await error('comparisons:restore', { id: first.id, undo_token: other.undo_token })).toMatchObject({ code: 'not_found' });
    expect(await error('comparisons:restore', { id: first.id, undo_token: 'nope' })).toEqual({ code: 'invalid_args', message: 'comparisons.restore: undo_token: must be the undo token that delete returned' });
    expect((await value('comparisons:list')).comparisons).toEqual([]);
    expect(await value('comparisons:restore', token)).toEqual(first);
    expect(await error('comparisons:restore', token)).toMatchObject({ code: 'not_found' });
    expect(await value('comparisons:restore', other)).toEqual(second);
    expect((await value('comparisons:list')).comparisons.map((x) => x.name)).toEqual(['second', 'first']);
    expect((await value('comparisons:get', { id: second.id }))!.plan_ids).toEqual([c.id, b.id, a.id]);
    // Deleted again and left 30 days: gone when the database opens, its rows in comparison_plans with it.
    const again = await value('comparisons:delete', { id: first.id });
    storage.close();
    clock += 31 * 24 * 3600 * 1000;
    open();
    expect(await error('comparisons:restore', again)).toMatchObject({ code: 'not_found' });
    const db = new Database(path);
    expect(db.prepare('SELECT count(*) AS n FROM comparisons WHERE id = ?').get(first.id)).toEqual({ n: 0 });
    expect(db.prepare('SELECT count(*) AS n FROM comparison_plans WHERE comparison_id = ?').get(first.id)).toEqual({ n: 0 });
    db.close();
    expect((await value('comparisons:list')).comparisons.map((x) => x.name)).toEqual(['second']);
  });

  it('checks its arguments with the contract, naming the field', async () => {
    expect(await error('comparisons:save', { name: 'x', plan_ids: [a.id] })).toEqual({ code: 'invalid_args', message: 'comparisons.save: plan_ids: must name at least 2 plans' });
    expect((await error('comparisons:save', { name: 'x', plan_ids: [a.id, b.id, c.id, a.id, b.id] })).message).toContain('plan_ids: must name at most 4 plans');
    expect(await error('comparisons:save', { name: 'x', plan_ids: [a.id, a.id] })).toEqual({ code: 'invalid_args', message: 'comparisons.save: plan_ids: must not name a plan twice' });
    expect(await error('comparisons:save', { name: ' ', plan_ids: [a.id, b.id] })).toEqual({ code: 'invalid_args', message: 'comparisons.save: name: must not be empty' });
    expect(await error('comparisons:save', { name: 'x', plan_ids: [a.id, 'not-an-id'] })).toEqual({ code: 'invalid_args', message: 'comparisons.save: plan_ids[1]: must be a plan id (a UUID)' });
    expect(await error('comparisons:get', { id: 7 })).toMatchObject({ code: 'invalid_args', message: 'comparisons.get: id: must be a comparison id (a UUID)' });
    await value('plans:delete', { id: c.id });
    expect(await error('comparisons:save', { name: 'x', plan_ids: [a.id, c.id] })).toEqual({ code: 'not_found', message: `comparisons.save: no saved plan with id ${c.id}` });
    expect((await value('comparisons:list')).comparisons).toEqual([]); // nothing half-saved
  });

  it('a damaged comparison row is a problem of the list, not an error', async () => {
    const saved = await value('comparisons:save', { name: 'to damage', plan_ids: [a.id, b.id] });
    const db = new Database(path);
    db.prepare("UPDATE comparisons SET created_at = 'yesterday' WHERE id = ?").run(saved.id);
    db.close();
    const list = await value('comparisons:list');
    expect(list.comparisons).toEqual([]);
    expect(list.problems).toEqual([{ id: saved.id, message: expect.stringContaining('created_at') }]);
    expect(await error('comparisons:get', { id: saved.id })).toMatchObject({ code: 'failed' });
  });
});

describe('the comparisons migration', () => {
  it('upgrades a version-2 database with a comparison in it: plans and comparison kept, the compared version unknown (null)', () => {
    storage.close();
    const old = join(tempDir(), 'plans.sqlite');
    const v2 = openStorage(old, { migrations: MIGRATIONS.filter((m) => m.version <= 2) });
    const plan = v2.plans.save({ name: 'kept', plan: mlpPlan(), notes: '', tags: [], result: null });
    const other = v2.plans.save({ name: 'kept too', plan: mlpPlan(8), notes: '', tags: [], result: null });
    const db = new Database(old);
    db.prepare("INSERT INTO comparisons (id, name, created_at, updated_at) VALUES ('00000000-0000-4000-8000-000000000001', 'from v2', '2026-11-01T00:00:00.000Z', '2026-11-01T00:00:00.000Z')").run();
    const insert = db.prepare("INSERT INTO comparison_plans (comparison_id, position, plan_id) VALUES ('00000000-0000-4000-8000-000000000001', ?, ?)");
    insert.run(0, plan.id);
    insert.run(1, other.id);
    expect(userVersion(db)).toBe(2);
    db.close();
    v2.close();

    storage = openStorage(old);
    expect(storage.notices).toEqual([expect.objectContaining({ id: 'database_backed_up', from_version: 2, to_version: LATEST_VERSION })]);
    const record = storage.comparisons.get('00000000-0000-4000-8000-000000000001')!;
    expect(record.plans.map((p) => [p.plan?.name, p.compared_updated_at, p.status])).toEqual([
      ['kept', null, 'edited'],
      ['kept too', null, 'edited'],
    ]);
  });
});
