/**
 * The main process's guards as the source sets them up (security.ts, protocol.ts, ipc.ts), with `electron` replaced
 * by a recorder, so that weakening any of them fails here without a build (main-wiring.test.ts checks the built
 * bundle the same way when out/ exists):
 * - every web contents: navigation, redirects and webviews prevented; new windows denied, only https links handed to
 *   the system browser; every permission denied but writing to the clipboard, for requests and checks alike;
 * - the app:// scheme: exactly standard, secure, fetch and code cache (no CSP bypass, no service workers); it serves
 *   only GET/HEAD of app://memplan, with the CSP header;
 * - IPC: every channel of the contract refuses a call from anything but the app's top frame, and a call with invalid
 *   arguments, before its handler runs;
 * - the CSP the page declares itself (renderer/index.html) runs no inline or remote script and no eval.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { INVOKE_CHANNELS } from '../../../electron/common/channels.ts';
import type { Handlers } from '../../../electron/common/ipc.ts';
import { CONTENT_SECURITY_POLICY } from '../../../electron/main/security/csp.ts';
import { tempDir } from '../helpers.ts';

type Listener = (...args: unknown[]) => unknown;
const recorded = vi.hoisted(() => ({
  appListeners: {} as Record<string, ((...args: unknown[]) => unknown)[]>,
  permissionRequest: null as ((...args: unknown[]) => unknown) | null,
  permissionCheck: null as ((...args: unknown[]) => unknown) | null,
  schemes: null as unknown,
  protocolHandlers: {} as Record<string, (request: Request) => Promise<Response>>,
  ipcHandlers: {} as Record<string, (event: unknown, args: unknown) => Promise<unknown>>,
  openedExternal: [] as string[],
}));

vi.mock('electron', () => ({
  app: { on: (event: string, listener: Listener) => void (recorded.appListeners[event] ??= []).push(listener) },
  session: {
    defaultSession: {
      setPermissionRequestHandler: (handler: Listener) => void (recorded.permissionRequest = handler),
      setPermissionCheckHandler: (handler: Listener) => void (recorded.permissionCheck = handler),
    },
  },
  shell: { openExternal: async (url: string) => void recorded.openedExternal.push(url) },
  protocol: {
    registerSchemesAsPrivileged: (schemes: unknown) => void (recorded.schemes = schemes),
    handle: (scheme: string, handler: (request: Request) => Promise<Response>) => void (recorded.protocolHandlers[scheme] = handler),
  },
  ipcMain: { handle: (channel: string, handler: (event: unknown, args: unknown) => Promise<unknown>) => void (recorded.ipcHandlers[channel] = handler) },
}));

const { setupSecurity } = await import('../../../electron/main/security.ts');
const { registerAppScheme, setupProtocol } = await import('../../../electron/main/protocol.ts');
const { setupIpc } = await import('../../../electron/main/ipc.ts');
const { isAppUrl } = await import('../../../electron/main/security/origin.ts');

/** A web contents as `web-contents-created` hands it over: records its listeners and its window-open handler. */
function fakeContents() {
  const listeners: Record<string, Listener> = {};
  let openHandler: ((details: { url: string }) => unknown) | null = null;
  return {
    listeners,
    open: (url: string) => openHandler!({ url }),
    contents: {
      on: (event: string, listener: Listener) => void (listeners[event] = listener),
      setWindowOpenHandler: (handler: (details: { url: string }) => unknown) => void (openHandler = handler),
    },
  };
}

describe('every web contents the app creates', () => {
  beforeAll(() => setupSecurity());

  it('cannot navigate, be redirected or attach a webview', () => {
    const page = fakeContents();
    for (const listener of recorded.appListeners['web-contents-created']!) listener({}, page.contents);
    for (const event of ['will-navigate', 'will-redirect', 'will-attach-webview']) {
      const preventDefault = vi.fn();
      expect(page.listeners[event], event).toBeTypeOf('function');
      page.listeners[event]!({ preventDefault }, 'https://evil.example/');
      expect(preventDefault, event).toHaveBeenCalledOnce();
    }
  });

  it('opens no window: https links go to the system browser, nothing else anywhere', async () => {
    const page = fakeContents();
    for (const listener of recorded.appListeners['web-contents-created']!) listener({}, page.contents);
    for (const url of ['https://pytorch.org/', 'http://example.com/', 'file:///etc/passwd', 'app://memplan/index.html', 'javascript:alert(1)']) expect(page.open(url), url).toEqual({ action: 'deny' });
    await Promise.resolve();
    expect(recorded.openedExternal).toEqual(['https://pytorch.org/']);
  });

  it('is denied every permission but writing to the clipboard, when asked and when checked', () => {
    for (const permission of ['media', 'geolocation', 'notifications', 'clipboard-read', 'midi', 'openExternal', 'fullscreen', 'pointerLock']) {
      const callback = vi.fn();
      recorded.permissionRequest!({}, permission, callback);
      expect(callback, permission).toHaveBeenCalledWith(false);
      expect(recorded.permissionCheck!({}, permission), permission).toBe(false);
    }
    const callback = vi.fn();
    recorded.permissionRequest!({}, 'clipboard-sanitized-write', callback);
    expect(callback).toHaveBeenCalledWith(true);
  });
});

describe('the app:// scheme', () => {
  it('is standard and secure, with no privilege beyond fetch and the code cache', () => {
    registerAppScheme();
    expect(recorded.schemes).toEqual([{ scheme: 'app', privileges: { standard: true, secure: true, supportFetchAPI: true, codeCache: true } }]);
  });

  it('serves only GET and HEAD of app://memplan, with the CSP header', async () => {
    const dir = tempDir();
    const { mkdirSync, writeFileSync } = await import('node:fs');
    mkdirSync(join(dir, 'renderer'));
    writeFileSync(join(dir, 'renderer', 'index.html'), '<!doctype html>');
    setupProtocol(join(dir, 'renderer'));
    const handle = recorded.protocolHandlers['app']!;
    const page = await handle(new Request('app://memplan/'));
    expect(page.status).toBe(200);
    expect(page.headers.get('Content-Security-Policy')).toBe(CONTENT_SECURITY_POLICY);
    expect(await page.text()).toBe('<!doctype html>');
    expect((await handle(new Request('app://other/'))).status).toBe(404);
    expect((await handle(new Request('app://memplan/', { method: 'POST', body: 'x' }))).status).toBe(404);
    // The URL parser folds %2e%2e into .., so the path is /etc/passwd under the renderer folder: not found, never read.
    const escape = await handle(new Request('app://memplan/%2e%2e/%2e%2e/etc/passwd'));
    expect([403, 404]).toContain(escape.status);
    expect(await escape.text()).not.toContain('root:');
  });
});

describe('every IPC channel', () => {
  const called: string[] = [];
  const handlers = Object.fromEntries(INVOKE_CHANNELS.map((channel) => [channel, () => void called.push(channel)])) as unknown as Handlers;
  const event = (url: string, top = true) => ({ senderFrame: { url, parent: top ? null : { url: 'app://memplan/index.html' } } });
  beforeAll(() => setupIpc(handlers, isAppUrl));

  it('is registered, once each', () => {
    expect(Object.keys(recorded.ipcHandlers).sort()).toEqual([...INVOKE_CHANNELS].sort());
  });

  it.each([...INVOKE_CHANNELS])('%s refuses unknown senders and a subframe of the app, before its handler runs', async (channel) => {
    for (const sender of [event('https://evil.example/'), event('file:///tmp/x.html'), event('app://memplan.evil/'), event('app://memplan/index.html', false), { senderFrame: null }]) {
      expect(await recorded.ipcHandlers[channel]!(sender, {})).toMatchObject({ ok: false, error: { code: 'refused' } });
    }
    expect(called).not.toContain(channel);
  });

  it.each([...INVOKE_CHANNELS])('%s refuses invalid arguments before its handler runs', async (channel) => {
    for (const args of ['not the arguments', 42, [1, 2], { __proto__: { id: 'x' }, unexpected: 'field', id: 7 }]) {
      expect(await recorded.ipcHandlers[channel]!(event('app://memplan/index.html'), args), JSON.stringify(args)).toMatchObject({ ok: false, error: { code: 'invalid_args' } });
    }
    expect(called).not.toContain(channel);
  });
});

describe('the CSP the page declares (renderer/index.html)', () => {
  const html = readFileSync(join(import.meta.dirname, '../../../renderer/index.html'), 'utf8');
  const content = /http-equiv="Content-Security-Policy"\s+content="([^"]+)"/.exec(html)?.[1] ?? '';
  const directives = new Map(content.split(';').map((d) => d.trim().split(/\s+/)).map(([name, ...values]) => [name!, values]));

  it('runs only the app’s own scripts: no inline script, no eval, no remote origin', () => {
    expect(directives.get('script-src')).toEqual(["'self'"]);
    expect(directives.get('object-src')).toEqual(["'none'"]);
    expect(directives.get('base-uri')).toEqual(["'none'"]);
    expect(content).not.toMatch(/unsafe-eval|https?:|\*/);
    expect(directives.get('script-src')).not.toContain("'unsafe-inline'");
  });
});
