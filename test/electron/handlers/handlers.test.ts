/**
 * Every channel through the same dispatch the main process uses (sender check, argument schema, handler, result
 * schema), against a real SQLite file.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { beforeEach, describe, expect, it } from 'vitest';
import { contract, INVOKE_CHANNELS, type ChannelResult, type InvokeChannel, type IpcAnswer, type PlanSummary } from '../../../electron/common/ipc.ts';
import { simulateResultSchema } from '../../../engine/index.ts';
import { dispatch } from '../../../electron/main/handlers/dispatch.ts';
import { createHandlers, type Dialogs } from '../../../electron/main/handlers/handlers.ts';
import { isAppUrl } from '../../../electron/main/security/origin.ts';
import { openStorage, type Storage } from '../../../electron/main/storage/index.ts';
import { engineResults, resnetPlan, tempDir } from '../helpers.ts';

const APP_PAGE = 'app://memplan/index.html';

let storage: Storage;
let clock: number;
let call: <C extends InvokeChannel>(channel: C, args?: unknown, sender?: string | null) => Promise<IpcAnswer<ChannelResult<C>>>;
let value: <C extends InvokeChannel>(channel: C, args?: unknown) => Promise<ChannelResult<C>>;
const opened: string[] = [];
const saved: { name: string; bytes: number }[] = [];

/** What app.setLocale asked the menu to speak, in order. */
let menuLocales: [string, string][] = [];

beforeEach(() => {
  menuLocales = [];
  clock = Date.parse('2026-11-24T03:00:00.000Z');
  storage = openStorage(join(tempDir(), 'plans.sqlite'), { now: () => new Date((clock += 1000)) });
  const dialogs: Dialogs = {
    openText: async (purpose) => (opened.push(purpose), { name: 'config.json', text: '{"model_type":"llama"}' }),
    openBytes: async () => ({ name: 'snap.pickle', bytes: new Uint8Array([128, 4, 46]).buffer }),
    saveText: async ({ suggested_name }) => ({ name: suggested_name }),
    saveBytes: async ({ suggested_name, bytes }) => (saved.push({ name: suggested_name, bytes: bytes.byteLength }), { name: suggested_name }),
    saveReport: async ({ suggested_name, images }) => ({ name: suggested_name, images: images.map((i) => i.name) }),
  };
  const handlers = createHandlers({
    plans: storage.plans,
    comparisons: storage.comparisons,
    snapshots: storage.snapshots,
    dialogs,
    info: () => ({ name: 'memplan', version: '0.1.0', electron_version: null, platform: 'linux', data_dir: '/d', database_path: '/d/plans.sqlite', notices: [] }),
    setMenuLocale: (locale, choice) => menuLocales.push([locale, choice]),
  });
  call = (channel, args, sender = APP_PAGE) => dispatch(handlers, channel, args, { url: sender ?? undefined }, isAppUrl) as never;
  value = async (channel, args) => {
    const answer = await call(channel, args);
    if (!answer.ok) throw new Error(answer.error.message);
    return answer.value;
  };
  return () => storage.close();
});

async function save(name: string, extra: Record<string, unknown> = {}): Promise<PlanSummary> {
  return value('plans:save', { name, plan: resnetPlan(), notes: '', tags: [], ...extra });
}

describe('the IPC contract', () => {
  it('defines exactly the channels the preload exposes', () => {
    expect(Object.keys(contract).sort()).toEqual([...INVOKE_CHANNELS].sort());
  });
});

describe('plans', () => {
  it('saves a new plan and reads it back: plan file (named as the plan), result with typed arrays as plain arrays, notes, tags', async () => {
    const result = engineResults().simulate;
    expect(result.timeline.event).toBeInstanceOf(Float64Array);
    const saved = await save('ResNet on the A100', { notes: 'baseline', tags: [' vision ', 'a100', 'vision', ''], result });
    expect(saved).toMatchObject({
      name: 'ResNet on the A100',
      notes: 'baseline',
      tags: ['vision', 'a100'],
      plan_valid: true,
      created_at: '2026-11-24T03:00:02.000Z',
      updated_at: '2026-11-24T03:00:02.000Z',
      result_summary: { kind: 'simulate', schema_version: 1, fits: result.fits, peak_reserved_bytes: result.peak_reserved_bytes, max_batch: null },
    });
    expect(saved.id).toMatch(/^[0-9a-f-]{36}$/);
    const record = await value('plans:get', { id: saved.id });
    expect(record?.plan).toEqual({ ...resnetPlan(), name: 'ResNet on the A100' });
    expect(record?.result).toMatchObject({ kind: 'simulate', peak_reserved_bytes: result.peak_reserved_bytes, timeline: { event: Array.from(result.timeline.event), phase: Array.from(result.timeline.phase) } });
    expect(simulateResultSchema.parse(record?.result)).toEqual(result);
  });

  it('updates a plan in place: every field replaced, a save without a result clears the old one', async () => {
    const first = await save('v1', { result: engineResults().simulate });
    const second = await value('plans:save', { id: first.id, name: 'v2', plan: resnetPlan(64), notes: 'smaller batch', tags: ['x'] });
    expect(second).toMatchObject({ id: first.id, name: 'v2', notes: 'smaller batch', tags: ['x'], created_at: first.created_at, result_summary: null });
    expect(second.updated_at > first.updated_at).toBe(true);
    expect((await value('plans:get', { id: first.id }))?.result).toBeNull();
    expect((await value('plans:list')).plans).toHaveLength(1);
  });

  it('stores an incomplete plan (mid-edit) and says it does not pass the plan schema', async () => {
    const saved = await value('plans:save', { name: 'draft', plan: { format: 'memplan.plan', version: 1, training: { batch_size: -1 } } });
    expect(saved.plan_valid).toBe(false);
  });

  it('summarizes a max-batch result for the list', async () => {
    const result = engineResults().maxBatch;
    expect(result.max_batch).toBeGreaterThan(0);
    const saved = await save('search', { result });
    expect(saved.result_summary).toEqual({ kind: 'max_batch', schema_version: 1, fits: true, peak_reserved_bytes: null, max_batch: result.max_batch });
  });

  it('lists newest first and searches name, notes and tags, every word, case-insensitively', async () => {
    await save('GPT-2 XL on the H100', { notes: 'baseline for the paper', tags: ['llm'] });
    await save('ResNet-50 AMP', { notes: 'vision run', tags: ['Vision', 'a100'] });
    await save('Llama 3 8B', { notes: '长上下文', tags: ['llm', 'bf16'] });
    const names = async (query: string) => (await value('plans:list', { query })).plans.map((p) => p.name);
    expect(await names('')).toEqual(['Llama 3 8B', 'ResNet-50 AMP', 'GPT-2 XL on the H100']);
    expect(await names('LLM')).toEqual(['Llama 3 8B', 'GPT-2 XL on the H100']);
    expect(await names('vision')).toEqual(['ResNet-50 AMP']);
    expect(await names('llm   paper')).toEqual(['GPT-2 XL on the H100']);
    expect(await names('上下文')).toEqual(['Llama 3 8B']);
    expect(await names('h100 vision')).toEqual([]);
    expect(await names("50%' OR 1=1 --")).toEqual([]);
  });

  it('renames (the plan file too) and duplicates (a new id, the result kept)', async () => {
    const saved = await save('old', { result: engineResults().simulate });
    const renamed = await value('plans:rename', { id: saved.id, name: '  new name  ' });
    expect(renamed.name).toBe('new name');
    expect((await value('plans:get', { id: saved.id }))?.plan['name']).toBe('new name');
    expect((await value('plans:list', { query: 'old' })).plans).toEqual([]);
    const copy = await value('plans:duplicate', { id: saved.id });
    expect(copy.id).not.toBe(saved.id);
    expect(copy.name).toBe('new name (copy)');
    expect(copy.result_summary).toEqual(renamed.result_summary);
    const named = await value('plans:duplicate', { id: saved.id, name: 'batch 64' });
    expect((await value('plans:get', { id: named.id }))?.plan['name']).toBe('batch 64');
    expect((await value('plans:list')).plans.map((p) => p.name)).toEqual(['batch 64', 'new name (copy)', 'new name']);
  });

  it('deletes softly and restores with the undo token, in its old place', async () => {
    const a = await save('a');
    await save('b');
    const token = await value('plans:delete', { id: a.id });
    expect(token).toEqual({ id: a.id, undo_token: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    expect((await value('plans:list')).plans.map((p) => p.name)).toEqual(['b']);
    expect(await value('plans:get', { id: a.id })).toBeNull();
    const wrong = await call('plans:restore', { id: a.id, undo_token: crypto.randomUUID() });
    expect(wrong).toMatchObject({ ok: false, error: { code: 'not_found' } });
    const restored = await value('plans:restore', token);
    expect(restored).toMatchObject({ id: a.id, name: 'a', updated_at: a.updated_at });
    expect((await value('plans:list')).plans.map((p) => p.name)).toEqual(['b', 'a']);
    expect(await call('plans:restore', token)).toMatchObject({ ok: false, error: { code: 'not_found' } });
  });

  it('purges plans deleted more than 30 days ago when storage opens', async () => {
    const a = await save('a');
    await value('plans:delete', { id: a.id });
    clock += 29 * 24 * 3600 * 1000;
    expect(storage.plans.purgeDeleted()).toBe(0);
    clock += 2 * 24 * 3600 * 1000;
    expect(storage.plans.purgeDeleted()).toBe(1);
  });

  it('answers not_found for a missing or deleted plan', async () => {
    const missing = crypto.randomUUID();
    expect(await call('plans:rename', { id: missing, name: 'x' })).toEqual({ ok: false, error: { code: 'not_found', message: `plans.rename: no saved plan with id ${missing}` } });
    expect(await call('plans:save', { id: missing, name: 'x', plan: {} })).toMatchObject({ ok: false, error: { code: 'not_found' } });
    expect(await value('plans:get', { id: missing })).toBeNull();
  });

  it('reads back a result the engine can no longer read (older schema, a field gone) as no result; the summary stays', async () => {
    const saved = await save('old result', { result: engineResults().simulate });
    const raw = new Database(storage.path);
    raw.prepare("UPDATE plans SET result_json = json_remove(result_json, '$.timeline') WHERE id = ?").run(saved.id);
    raw.close();
    const record = await value('plans:get', { id: saved.id });
    expect(record?.result).toBeNull();
    expect(record?.result_summary).toMatchObject({ kind: 'simulate', schema_version: 1 });
  });

  it('reports a damaged row in the list instead of failing the list', async () => {
    const good = await save('good');
    const bad = await save('bad');
    const raw = new Database(storage.path);
    raw.prepare("UPDATE plans SET tags_json = 'not json' WHERE id = ?").run(bad.id);
    raw.close();
    const list = await value('plans:list');
    expect(list.plans.map((p) => p.id)).toEqual([good.id]);
    expect(list.problems).toEqual([{ id: bad.id, message: expect.stringContaining('tags_json: is not a JSON list of strings') }]);
    expect(await call('plans:get', { id: bad.id })).toMatchObject({ ok: false, error: { code: 'failed', message: expect.stringContaining(`saved plan ${bad.id}`) } });
  });
});

describe('arguments are validated with the contract, the message naming the field', () => {
  it.each([
    ['plans:save', { name: '', plan: {} }, 'plans.save: name: must not be empty'],
    ['plans:save', { name: 'x', plan: [] }, 'plans.save: plan: must be a plan file object'],
    ['plans:save', { name: 'x', plan: {}, tags: ['ok', 7] }, 'plans.save: tags[1]: must be text'],
    ['plans:save', { name: 'x', plan: {}, result: { kind: 'simulate' } }, 'plans.save: result.schema_version: must be the result schema version'],
    ['plans:save', { name: 'x', plan: {}, sneaky: true }, 'plans.save: Unrecognized key: "sneaky"'],
    ['plans:get', { id: 'DROP TABLE plans' }, 'plans.get: id: must be a plan id (a UUID)'],
    ['plans:get', undefined, 'plans.get: Invalid input: expected object, received undefined'],
    ['plans:restore', { id: crypto.randomUUID() }, 'plans.restore: undo_token: must be the undo token that delete returned'],
    ['files:openText', { purpose: 'etc_passwd' }, "files.openText: purpose: must be 'plan' or 'hf_config'"],
    ['files:saveText', { suggested_name: '../../.bashrc', text: '' }, 'files.saveText: suggested_name: must be a file name, without a folder'],
    ['plans:list', { query: 'x'.repeat(201) }, 'plans.list: query: must be at most 200 characters'],
  ] as const)('%s %j', async (channel, args, message) => {
    expect(await call(channel, args)).toEqual({ ok: false, error: { code: 'invalid_args', message } });
  });

  it('refuses a result that is not one the engine returns, naming the field', async () => {
    const base = { name: 'x', plan: resnetPlan() };
    const { plan_name: _, ...withoutName } = engineResults().simulate;
    expect(await call('plans:save', { ...base, result: withoutName })).toEqual({ ok: false, error: { code: 'invalid_args', message: 'plans.save: result.plan_name: Invalid input: expected string, received undefined' } });
    expect(await call('plans:save', { ...base, result: { kind: 'advice', schema_version: 1 } })).toEqual({
      ok: false,
      error: { code: 'invalid_args', message: 'plans.save: result.kind: must be one of simulate, max_batch, replay' },
    });
    expect(await call('plans:save', { ...base, result: { ...engineResults().simulate, schema_version: 2 } })).toMatchObject({
      ok: false,
      error: { code: 'invalid_args', message: 'plans.save: result.schema_version: is 2; this memplan reads and writes 1' },
    });
  });

  it('refuses a plan too large to store', async () => {
    const answer = await call('plans:save', { name: 'huge', plan: { blob: 'x'.repeat(5 * 1024 * 1024) } });
    expect(answer).toMatchObject({ ok: false, error: { code: 'invalid_args', message: expect.stringMatching(/^plans\.save: plan: is \d+ bytes as JSON, at most 4194304/) } });
  });

  it('answers an unknown channel with an error', async () => {
    expect(await call('plans:drop' as InvokeChannel, {})).toEqual({ ok: false, error: { code: 'invalid_args', message: 'unknown channel "plans:drop"' } });
  });
});

describe('the sender is checked before anything runs', () => {
  it.each([null, 'https://evil.example/', 'file:///etc/passwd', 'app://other/index.html', 'app://user:pw@memplan/', 'http://127.0.0.1:5173/'])('refuses %s', async (sender) => {
    const before = (await value('plans:list')).plans.length;
    const answer = await call('plans:save', { name: 'x', plan: {} }, sender);
    expect(answer).toMatchObject({ ok: false, error: { code: 'refused', message: expect.stringContaining("only the app's own page may call it") } });
    expect((await value('plans:list')).plans.length).toBe(before);
  });

  it('accepts any page of app://memplan', async () => {
    expect(await call('plans:list', {}, 'app://memplan/index.html#/plans')).toMatchObject({ ok: true });
  });
});

describe('files and app', () => {
  it('opens text and bytes through the dialogs, saves text', async () => {
    expect(await value('files:openText', { purpose: 'hf_config' })).toEqual({ name: 'config.json', text: '{"model_type":"llama"}' });
    const snapshot = await value('files:openBytes', { purpose: 'snapshot' });
    expect(snapshot?.bytes).toBeInstanceOf(ArrayBuffer);
    expect(await value('files:saveText', { suggested_name: 'plan.json', text: '{}', filters: [{ name: 'Plan', extensions: ['json'] }] })).toEqual({ name: 'plan.json' });
  });

  it('saves a PNG and a report with its images; anything that is not a PNG, or a name with a folder, is refused', async () => {
    const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13]).buffer;
    expect(await value('files:saveBytes', { suggested_name: 'timeline.png', bytes: png })).toEqual({ name: 'timeline.png' });
    expect(saved.at(-1)).toEqual({ name: 'timeline.png', bytes: 12 });
    const images = [{ name: 'r-timeline.png', bytes: png }];
    expect(await value('files:saveReport', { suggested_name: 'r.md', text: '# r', images })).toEqual({ name: 'r.md', images: ['r-timeline.png'] });
    const refused = async (channel: 'files:saveBytes' | 'files:saveReport', args: unknown) => ((await call(channel, args)) as { error?: { message: string } }).error?.message;
    expect(await refused('files:saveBytes', { suggested_name: 'x.png', bytes: new TextEncoder().encode('#!/bin/sh').buffer })).toBe('files.saveBytes: bytes: must be a PNG image');
    expect(await refused('files:saveBytes', { suggested_name: 'x.png', bytes: 'iVBORw0K' })).toBe('files.saveBytes: bytes: must be the bytes of a PNG image');
    expect(await refused('files:saveReport', { suggested_name: 'r.md', text: '', images: [{ name: '../x.png', bytes: png }] })).toBe('files.saveReport: images[0].name: must be a file name, without a folder');
    expect(await refused('files:saveReport', { suggested_name: 'r.md', text: '', images: [{ name: 'x.sh', bytes: png }] })).toBe('files.saveReport: images[0].name: must end in .png');
    expect(await refused('files:saveReport', { suggested_name: 'r.md', text: '', images: [images[0], images[0]] })).toBe('files.saveReport: images: must have different names');
  });

  it('app.info takes no arguments', async () => {
    expect(await value('app:info')).toMatchObject({ name: 'memplan', database_path: '/d/plans.sqlite', notices: [] });
    expect(await call('app:info', { extra: 1 })).toMatchObject({ ok: false, error: { code: 'invalid_args' } });
  });

  it('app.setLocale rebuilds the menu in one of the interface’s languages, and refuses others by field', async () => {
    expect(await value('app:setLocale', { locale: 'zh-CN', choice: 'system' })).toBeNull();
    expect(menuLocales).toEqual([['zh-CN', 'system']]);
    const refused = await call('app:setLocale', { locale: 'fr', choice: 'fr' });
    expect(refused).toMatchObject({ ok: false, error: { code: 'invalid_args' } });
    expect(refused.ok ? '' : refused.error.message).toMatch(/locale/);
    expect(await call('app:setLocale', { locale: 'en' })).toMatchObject({ ok: false, error: { code: 'invalid_args' } });
    expect(menuLocales).toHaveLength(1);
  });
});
