/**
 * The e2e test bridge (test/e2e/support/bridge.ts) itself: it serves the renderer with the app's CSP and refuses
 * paths out of it, answers IPC with the main process's handlers (validation and sender check included), answers
 * dialogs from its queues and pushes menu commands. The last test drives its client in Chromium, when present.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CONTENT_SECURITY_POLICY } from '../../electron/main/security/csp.ts';
import { startBridge, type Bridge } from '../e2e/support/bridge.ts';
import { resultJsonReplacer } from '../../engine/index.ts';
import { engineResults, resnetPlan, tempDir } from './helpers.ts';

const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

let bridge: Bridge;
let dir: string;

beforeEach(async () => {
  dir = tempDir();
  const rendererDir = join(dir, 'renderer');
  mkdirSync(join(rendererDir, 'assets'), { recursive: true });
  writeFileSync(join(rendererDir, 'index.html'), '<!doctype html><html><head><title>memplan</title></head><body>bridge</body></html>');
  writeFileSync(join(rendererDir, 'assets', 'index.js'), 'console.log(1)');
  writeFileSync(join(dir, 'secret.txt'), 'outside the renderer');
  bridge = await startBridge({ rendererDir, dbPath: join(dir, 'data', 'plans.sqlite') });
});
afterEach(async () => {
  await bridge.close();
});

/** A raw request (fetch would normalize `..` away and forbids setting Origin). */
function raw(method: string, path: string, { body, origin }: { body?: unknown; origin?: string } = {}): Promise<{ status: number; headers: Record<string, unknown>; text: string }> {
  return new Promise((resolve, reject) => {
    const url = new URL(bridge.url);
    const req = request({ host: url.hostname, port: url.port, method, path, headers: { 'Content-Type': 'application/json', ...(origin ? { Origin: origin } : {}) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

const ipc = (channel: string, body: unknown, origin = bridge.origin) => raw('POST', `/ipc/${channel}`, { body, origin }).then((r) => ({ status: r.status, answer: JSON.parse(r.text) }));

describe('the test bridge', () => {
  it('listens on 127.0.0.1 and serves the renderer with the same CSP as app://', async () => {
    expect(bridge.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    const page = await fetch(bridge.url);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toBe(CONTENT_SECURITY_POLICY);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(await page.text()).toContain('bridge');
    const script = await fetch(`${bridge.url}assets/index.js`);
    expect(script.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
  });

  it.each(['/../secret.txt', '/assets/../../secret.txt', '/%2e%2e/secret.txt', '/assets/..%2f..%2fsecret.txt', '/..%5csecret.txt'])('refuses %s', async (path) => {
    const answer = await raw('GET', path);
    expect([400, 403, 404]).toContain(answer.status);
    expect(answer.text).not.toContain('outside the renderer');
  });

  it('answers IPC with the main process handlers on a real SQLite file', async () => {
    const result = JSON.parse(JSON.stringify(engineResults().simulate, resultJsonReplacer));
    const saved = await ipc('plans:save', { name: 'over the bridge', plan: resnetPlan(), result, tags: ['e2e'] });
    expect(saved).toMatchObject({ status: 200, answer: { ok: true, value: { name: 'over the bridge', tags: ['e2e'], plan_valid: true } } });
    const list = await ipc('plans:list', { query: 'bridge' });
    expect(list.answer.value.plans.map((p: { name: string }) => p.name)).toEqual(['over the bridge']);
    expect(existsSync(join(dir, 'data', 'plans.sqlite'))).toBe(true);
    expect(bridge.storage.plans.list().plans).toHaveLength(1);
    expect(bridge.calls.map((c) => c.channel)).toEqual(['plans:save', 'plans:list']);
  });

  it('keeps its database in a temp folder of its own when given none, removed on close', async () => {
    const own = await startBridge({ rendererDir: join(dir, 'renderer') });
    expect(own.dbPath).not.toContain(dir);
    expect(existsSync(own.dbPath)).toBe(true);
    await own.close();
    expect(existsSync(dirname(own.dbPath))).toBe(false);
  });

  it('validates arguments as the app does', async () => {
    expect((await ipc('plans:save', { name: '', plan: {} })).answer).toEqual({ ok: false, error: { code: 'invalid_args', message: 'plans.save: name: must not be empty' } });
  });

  it('answers a body that is not JSON with a clear error', async () => {
    const url = new URL(bridge.url);
    const answer = await new Promise<string>((resolve, reject) => {
      const req = request({ host: url.hostname, port: url.port, method: 'POST', path: '/ipc/plans:list', headers: { Origin: bridge.origin } }, (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve(text));
      });
      req.on('error', reject);
      req.end('{not json');
    });
    expect(JSON.parse(answer)).toEqual({ ok: false, error: { code: 'invalid_args', message: 'plans.list: the request body is not JSON' } });
  });

  it('refuses calls from another origin, or none', async () => {
    expect(await ipc('plans:list', {}, 'http://evil.example')).toMatchObject({ status: 403, answer: { ok: false, error: { code: 'refused' } } });
    const none = await raw('POST', '/ipc/plans:list', { body: {} });
    expect(none.status).toBe(403);
  });

  it('answers open dialogs from its queue (cancel when empty) and keeps saved files', async () => {
    bridge.queueOpenFile({ name: 'config.json', text: '{"model_type":"llama"}' });
    bridge.queueOpenFile(null);
    expect((await ipc('files:openText', { purpose: 'hf_config' })).answer.value).toEqual({ name: 'config.json', text: '{"model_type":"llama"}' });
    expect((await ipc('files:openText', { purpose: 'plan' })).answer.value).toBeNull();
    expect((await ipc('files:openText', { purpose: 'plan' })).answer.value).toBeNull();
    bridge.queueOpenFile({ name: 'snap.pickle', bytes: new Uint8Array([128, 4, 46]) });
    expect((await ipc('files:openBytes', { purpose: 'snapshot' })).answer.value).toEqual({ name: 'snap.pickle', bytes: { $bytes_base64: 'gAQu' } });
    expect((await ipc('files:saveText', { suggested_name: 'plan.json', text: '{}' })).answer.value).toEqual({ name: 'plan.json' });
    expect(bridge.savedFiles).toEqual([{ name: 'plan.json', text: '{}' }]);
    expect(bridge.dialogsShown.map((d) => d.kind)).toEqual(['openText', 'openText', 'openText', 'openBytes', 'saveText']);
  });

  it('pushes menu commands as server-sent events, queued until the page listens', async () => {
    bridge.sendMenuCommand('save');
    const response = await fetch(`${bridge.url}menu-events`);
    const reader = response.body!.getReader();
    let text = '';
    const readUntil = async (needle: string) => {
      while (!text.includes(needle)) text += new TextDecoder().decode((await reader.read()).value);
    };
    await readUntil('data: "save"');
    bridge.sendMenuCommand('open-snapshot');
    await readUntil('data: "open-snapshot"');
    await reader.cancel();
  });

  it.skipIf(!existsSync(CHROMIUM))('gives the page window.memplan with the preload verbs (Chromium)', async () => {
    const { chromium } = await import('playwright-core');
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    try {
      const context = await browser.newContext();
      await bridge.install(context);
      const page = await context.newPage();
      await page.goto(bridge.url);
      const simulateJson = JSON.parse(JSON.stringify(engineResults().simulate, resultJsonReplacer)) as Record<string, unknown>;
      const answer = await page.evaluate(async (result) => {
        const memplan = (globalThis as unknown as { memplan: import('../../electron/common/ipc.ts').MemplanApi }).memplan;
        const commands: string[] = [];
        memplan.menu.onCommand((c) => commands.push(c));
        const saved = await memplan.plans.save({
          name: 'from the page',
          plan: { format: 'memplan.plan', version: 1, model: { preset: 'gpt2' }, training: { batch_size: 4 } },
          result: { ...result, kind: 'simulate', schema_version: 1, timeline: { ...(result['timeline'] as object), reserved_max: new Float64Array((result['timeline'] as { reserved_max: number[] }).reserved_max) } },
        });
        const record = await memplan.plans.get({ id: saved.id });
        const token = await memplan.plans.delete({ id: saved.id });
        const afterDelete = (await memplan.plans.list({ query: '' })).plans.length;
        await memplan.plans.restore(token);
        const info = await memplan.app.info();
        const snapshot = await memplan.files.openBytes({ purpose: 'snapshot' });
        let error = '';
        await memplan.plans.rename({ id: saved.id, name: '' }).catch((e: Error) => (error = e.message));
        let cloneError = '';
        const proxy = new Proxy({ query: '' }, {});
        await memplan.plans.list(proxy).catch((e: Error) => (cloneError = e.name));
        await new Promise((r) => setTimeout(r, 300));
        return {
          frozen: Object.isFrozen(memplan),
          groups: Object.keys(memplan).sort(),
          timeline: record?.result?.['timeline'],
          afterDelete,
          afterRestore: (await memplan.plans.list()).plans.length,
          database: info.database_path.endsWith('plans.sqlite'),
          snapshot: snapshot && { name: snapshot.name, isBuffer: snapshot.bytes instanceof ArrayBuffer, bytes: [...new Uint8Array(snapshot.bytes)] },
          error,
          cloneError,
          commands,
        };
      }, simulateJson);
      expect(answer).toMatchObject({ frozen: true, groups: ['app', 'comparisons', 'files', 'menu', 'plans', 'snapshots'], timeline: { reserved_max: (simulateJson['timeline'] as { reserved_max: number[] }).reserved_max }, afterDelete: 0, afterRestore: 1, database: true, error: 'plans.rename: name: must not be empty', cloneError: 'DataCloneError' });
      // The snapshot was not queued: cancelled.
      expect(answer.snapshot).toBeNull();
      bridge.queueOpenFile({ name: 'snap.pickle', bytes: new Uint8Array([1, 2, 255]) });
      const bytes = await page.evaluate(async () => {
        const memplan = (globalThis as unknown as { memplan: import('../../electron/common/ipc.ts').MemplanApi }).memplan;
        const commands: string[] = [];
        memplan.menu.onCommand((c) => commands.push(c));
        const file = await memplan.files.openBytes({ purpose: 'snapshot' });
        return { name: file?.name, isBuffer: file?.bytes instanceof ArrayBuffer, bytes: file ? [...new Uint8Array(file.bytes)] : [] };
      });
      expect(bytes).toEqual({ name: 'snap.pickle', isBuffer: true, bytes: [1, 2, 255] });
      const received = page.evaluate(
        () =>
          new Promise<string>((resolve) => {
            (globalThis as unknown as { memplan: import('../../electron/common/ipc.ts').MemplanApi }).memplan.menu.onCommand(resolve);
          }),
      );
      await page.waitForTimeout(200);
      bridge.sendMenuCommand('simulate');
      expect(await received).toBe('simulate');
    } finally {
      await browser.close();
    }
  });
});
