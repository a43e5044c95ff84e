/**
 * Snapshots attached to plans through the IPC verbs (the same dispatch the main process uses), on a real SQLite
 * file: stored gzipped whatever was opened, read back byte for byte with a result the engine parses, the same file
 * attached twice kept once, listed per plan, detached; refused for a missing plan or a result that is not a
 * replay; a database of schema 3 gains the columns.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import Database from 'better-sqlite3';
import { beforeEach, describe, expect, it } from 'vitest';
import { readSnapshotBytes, replay, replayResultSchema, stringifyResult, type ReplayResult } from '../../../engine/index.ts';
import type { ChannelResult, InvokeChannel, IpcAnswer } from '../../../electron/common/ipc.ts';
import { dispatch } from '../../../electron/main/handlers/dispatch.ts';
import { createHandlers, type Dialogs } from '../../../electron/main/handlers/handlers.ts';
import { isAppUrl } from '../../../electron/main/security/origin.ts';
import { openStorage, type Storage } from '../../../electron/main/storage/index.ts';
import { LATEST_VERSION, MIGRATIONS, userVersion } from '../../../electron/main/storage/migrations.ts';
import { mlpPlan, tempDir } from '../helpers.ts';

let storage: Storage;
let path: string;
let clock: number;
let call: <C extends InvokeChannel>(channel: C, args?: unknown) => Promise<IpcAnswer<ChannelResult<C>>>;

const noDialogs = new Proxy({}, { get: () => () => Promise.reject(new Error('no dialog in this test')) }) as Dialogs;
const gz = new Uint8Array(readFileSync(new URL('../../fixtures/traces/cnn_amp_fp16.pickle.gz', import.meta.url)));
const pickle = new Uint8Array(gunzipSync(gz));
const result: ReplayResult = replay(readSnapshotBytes(gz), { whatIf: ['expandable_segments:True'] });
/** The result as the renderer sends it over IPC: JSON-shaped (typed arrays as plain arrays). */
const resultJson = JSON.parse(stringifyResult(result)) as Record<string, unknown>;
const buffer = (b: Uint8Array) => b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer;

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

beforeEach(() => {
  path = join(tempDir(), 'plans.sqlite');
  clock = Date.parse('2026-11-25T10:00:00.000Z');
  open();
});

describe('snapshots attached to plans', () => {
  it('stores an uncompressed pickle gzipped and gives back the same file, with a result the engine reads', async () => {
    const plan = storage.plans.save({ name: 'CNN', plan: mlpPlan(), notes: '', tags: [], result: null });
    const summary = await value('snapshots:attach', { plan_id: plan.id, name: 'cnn.pickle', bytes: buffer(pickle), result: resultJson, memory_limit_bytes: 8 * 2 ** 30 });
    expect(summary).toMatchObject({ plan_id: plan.id, name: 'cnn.pickle', size_bytes: pickle.length, memory_limit_bytes: 8 * 2 ** 30, events: result.events });
    expect(summary.real_peak_allocated_bytes).toBe(result.real_peak_allocated_bytes);
    expect(summary.stored_bytes).toBeLessThan(pickle.length / 4);

    // the original file may be gone: everything comes from the database
    storage.close();
    open();
    const record = (await value('snapshots:get', { id: summary.id }))!;
    const stored = new Uint8Array(record.bytes);
    expect(stored.slice(0, 2)).toEqual(new Uint8Array([0x1f, 0x8b]));
    expect(new Uint8Array(gunzipSync(stored))).toEqual(pickle);
    const back = replayResultSchema.parse(record.result);
    expect(back.real_peak_reserved_bytes).toBe(result.real_peak_reserved_bytes);
    expect(back.timeline.allocated_max).toEqual(result.timeline.allocated_max);
    expect(back.peak_segments?.segments.length).toBe(result.peak_segments?.segments.length);
  });

  it('keeps a gzipped file as it is, once per plan, lists per plan newest first, and detaches', async () => {
    const a = storage.plans.save({ name: 'A', plan: mlpPlan(), notes: '', tags: [], result: null });
    const b = storage.plans.save({ name: 'B', plan: mlpPlan(8), notes: '', tags: [], result: null });
    const first = await value('snapshots:attach', { plan_id: a.id, name: 'run.pickle.gz', bytes: buffer(gz), result: resultJson });
    expect(first.stored_bytes).toBe(gz.length);
    expect(new Uint8Array((await value('snapshots:get', { id: first.id }))!.bytes)).toEqual(gz);
    const again = await value('snapshots:attach', { plan_id: a.id, name: 'renamed.pickle.gz', bytes: buffer(gz), result: resultJson, memory_limit_bytes: 2 ** 33 });
    expect(again.id).toBe(first.id);
    expect(again.name).toBe('renamed.pickle.gz');
    await value('snapshots:attach', { plan_id: a.id, name: 'raw.pickle', bytes: buffer(pickle), result: resultJson });
    await value('snapshots:attach', { plan_id: b.id, name: 'other.pickle.gz', bytes: buffer(gz), result: resultJson });
    expect((await value('snapshots:list', { plan_id: a.id })).snapshots.map((s) => s.name)).toEqual(['raw.pickle', 'renamed.pickle.gz']);
    expect((await value('snapshots:list', { plan_id: b.id })).snapshots.map((s) => s.name)).toEqual(['other.pickle.gz']);
    await value('snapshots:detach', { id: first.id });
    expect((await value('snapshots:list', { plan_id: a.id })).snapshots.map((s) => s.name)).toEqual(['raw.pickle']);
    expect(await value('snapshots:get', { id: first.id })).toBeNull();
    const gone = await call('snapshots:detach', { id: first.id });
    expect(gone).toMatchObject({ ok: false, error: { code: 'not_found' } });
  });

  it('refuses a deleted plan, a result that is not a replay, and names the field', async () => {
    const plan = storage.plans.save({ name: 'A', plan: mlpPlan(), notes: '', tags: [], result: null });
    storage.plans.delete(plan.id);
    expect(await call('snapshots:attach', { plan_id: plan.id, name: 'x.pickle.gz', bytes: buffer(gz), result: resultJson })).toMatchObject({ ok: false, error: { code: 'not_found' } });
    const live = storage.plans.save({ name: 'B', plan: mlpPlan(), notes: '', tags: [], result: null });
    const wrongKind = await call('snapshots:attach', { plan_id: live.id, name: 'x.pickle.gz', bytes: buffer(gz), result: { kind: 'simulate', schema_version: result.schema_version } });
    expect(wrongKind).toMatchObject({ ok: false, error: { code: 'invalid_args', message: 'snapshots.attach: result.kind: must be replay' } });
    const empty = await call('snapshots:attach', { plan_id: live.id, name: 'x.pickle.gz', bytes: new ArrayBuffer(0), result: resultJson });
    expect(empty).toMatchObject({ ok: false, error: { code: 'invalid_args' } });
    expect(empty.ok ? '' : empty.error.message).toContain('bytes: must not be empty');
    const unnamed = await call('snapshots:attach', { plan_id: live.id, name: '  ', bytes: buffer(gz), result: resultJson });
    expect(unnamed.ok ? '' : unnamed.error.message).toBe('snapshots.attach: name: must not be empty');
  });

  it('migrates a schema-3 database: its snapshot rows gain the new columns', () => {
    storage.close();
    const old = join(tempDir(), 'v3.sqlite');
    const v3 = openStorage(old, { migrations: MIGRATIONS.filter((m) => m.version <= 3) });
    const plan = v3.plans.save({ name: 'kept', plan: mlpPlan(), notes: '', tags: [], result: null });
    const db = new Database(old);
    expect(userVersion(db)).toBe(3);
    db.prepare("INSERT INTO snapshots (id, plan_id, name, size_bytes, sha256, bytes, created_at) VALUES ('00000000-0000-4000-8000-0000000000aa', ?, 'old.pickle.gz', ?, ?, ?, '2026-11-01T00:00:00.000Z')").run(plan.id, gz.length, 'a'.repeat(64), Buffer.from(gz));
    db.close();
    v3.close();
    storage = openStorage(old);
    expect(LATEST_VERSION).toBeGreaterThanOrEqual(4);
    const listed = storage.snapshots.list(plan.id);
    expect(listed.problems).toEqual([]);
    expect(listed.snapshots).toEqual([expect.objectContaining({ name: 'old.pickle.gz', stored_bytes: 0, events: null, memory_limit_bytes: null })]);
  });
});
