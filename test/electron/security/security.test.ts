import { mkdirSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CONTENT_SECURITY_POLICY } from '../../../electron/main/security/csp.ts';
import { APP_ENTRY_URL, isAppUrl } from '../../../electron/main/security/origin.ts';
import { rendererResponse, resolveRendererFile } from '../../../electron/main/security/renderer-files.ts';
import { allowPermission, isExternalLinkAllowed, mainWindowOptions } from '../../../electron/main/security/window-options.ts';
import { tempDir } from '../helpers.ts';

function directives(csp: string): Map<string, string[]> {
  return new Map(csp.split(';').map((d) => d.trim().split(/\s+/)).map(([name, ...values]) => [name!, values]));
}

describe('the Content-Security-Policy', () => {
  const csp = directives(CONTENT_SECURITY_POLICY);

  it('runs only the app’s own scripts and workers: no inline script, no eval, no remote code', () => {
    expect(csp.get('default-src')).toEqual(["'none'"]);
    expect(csp.get('script-src')).toEqual(["'self'"]);
    expect(csp.get('worker-src')).toEqual(["'self'"]);
    expect(CONTENT_SECURITY_POLICY).not.toMatch(/unsafe-eval|wasm-unsafe-eval|https?:|\*/);
    expect(csp.get('style-src')).toEqual(["'self'"]);
  });

  it('talks to nothing but its own origin, and cannot be framed or post forms', () => {
    expect(csp.get('connect-src')).toEqual(["'self'", 'data:', 'blob:']);
    expect(csp.get('frame-ancestors')).toEqual(["'none'"]);
    expect(csp.get('form-action')).toEqual(["'none'"]);
    expect(csp.get('object-src')).toEqual(["'none'"]);
    expect(csp.get('base-uri')).toEqual(["'none'"]);
  });
});

describe('the renderer files served from app://memplan', () => {
  const root = resolve('/srv/out/renderer');

  it('maps / to index.html and a path to its file with its type', () => {
    expect(resolveRendererFile(root, '/')).toEqual({ ok: true, path: join(root, 'index.html'), mime: 'text/html; charset=utf-8' });
    expect(resolveRendererFile(root, '/assets/engine.worker-abc.js')).toMatchObject({ ok: true, path: join(root, 'assets', 'engine.worker-abc.js'), mime: 'text/javascript; charset=utf-8' });
    expect(resolveRendererFile(root, '/assets/a%20b.css')).toMatchObject({ ok: true, path: join(root, 'assets', 'a b.css') });
  });

  it.each([
    ['/../package.json', 403],
    ['/assets/../../main/index.js', 403],
    ['/%2e%2e/%2e%2e/etc/passwd', 403],
    ['/assets/..%2f..%2fmain%2findex.js', 403],
    ['/..%5c..%5cwindows%5cwin.ini', 403],
    ['/index.html%00.png', 400],
    ['/%E0%A4%A', 400],
  ] as const)('refuses %s', (pathname, status) => {
    expect(resolveRendererFile(root, pathname)).toMatchObject({ ok: false, status });
  });

  it('answers with the CSP header, and 404 for a missing file', async () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'r'));
    writeFileSync(join(dir, 'r', 'index.html'), '<!doctype html>');
    const page = await rendererResponse(join(dir, 'r'), '/', readFile);
    expect(page).toMatchObject({ status: 200, headers: { 'Content-Security-Policy': CONTENT_SECURITY_POLICY, 'X-Content-Type-Options': 'nosniff', 'Content-Type': 'text/html; charset=utf-8' } });
    expect((await rendererResponse(join(dir, 'r'), '/nope.js', readFile)).status).toBe(404);
    expect((await rendererResponse(join(dir, 'r'), '/%2e%2e/r/index.html', readFile)).status).toBe(403);
  });
});

describe('who may call the main process', () => {
  it('is the app’s own page, app://memplan, only', () => {
    expect(isAppUrl(APP_ENTRY_URL)).toBe(true);
    expect(isAppUrl('app://memplan/')).toBe(true);
    for (const url of [undefined, '', 'app://memplan.evil/', 'app://evil/', 'https://memplan/', 'file:///app/index.html', 'app://x@memplan/', 'not a url', 'devtools://devtools/']) expect(isAppUrl(url)).toBe(false);
  });
});

describe('the main window', () => {
  const options = mainWindowOptions({ preloadPath: '/app/out/preload/preload.cjs', dark: false });

  it('isolates the page: context isolation, sandbox, no Node, web security on', () => {
    expect(options.webPreferences).toMatchObject({
      preload: '/app/out/preload/preload.cjs',
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
      nodeIntegrationInWorker: false,
      nodeIntegrationInSubFrames: false,
      webSecurity: true,
      allowRunningInsecureContent: false,
      webviewTag: false,
      navigateOnDragDrop: false,
    });
  });

  it('waits for its first paint, in the theme’s background', () => {
    expect(options.show).toBe(false);
    expect(mainWindowOptions({ preloadPath: '', dark: true }).backgroundColor).not.toBe(options.backgroundColor);
  });

  it('grants no permission but writing to the clipboard', () => {
    for (const permission of ['media', 'geolocation', 'notifications', 'clipboard-read', 'openExternal', 'fileSystem', 'hid', 'serial']) expect(allowPermission(permission)).toBe(false);
    expect(allowPermission('clipboard-sanitized-write')).toBe(true);
  });

  it('opens only https links, outside the app', () => {
    expect(isExternalLinkAllowed('https://pytorch.org/docs/stable/notes/cuda.html')).toBe(true);
    for (const url of ['http://example.com', 'file:///etc/passwd', 'javascript:alert(1)', 'app://memplan/index.html', 'smb://host/share']) expect(isExternalLinkAllowed(url)).toBe(false);
  });
});
