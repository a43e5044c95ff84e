/**
 * The built main process (out/main/index.js) wired up, without Electron's binary: run under Node with `electron`
 * replaced by a recorder (fake-electron/), it must register the app:// scheme and every channel, open one secure
 * window on app://memplan, deny navigation, new windows and permissions, serve the renderer with the CSP, refuse
 * IPC from anything but the app's top frame, store plans in the data folder and send menu commands.
 * Skipped, saying so, when out/ has not been built (`npx electron-vite build`).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { INVOKE_CHANNELS } from '../../electron/common/channels.ts';
import { CONTENT_SECURITY_POLICY } from '../../electron/main/security/csp.ts';
import { tempDir } from './helpers.ts';

const ROOT = join(import.meta.dirname, '../..');
const MAIN = join(ROOT, 'out/main/index.js');
const BUILT = existsSync(MAIN) && existsSync(join(ROOT, 'out/renderer/index.html'));

describe.skipIf(!BUILT)('the built main process, under Node with a stand-in Electron', () => {
  if (!BUILT) it.skip('needs the built app in out/ (npx electron-vite build)', () => {});

  it('sets up the scheme, the window, the guards, IPC, the protocol and the menu', () => {
    const userData = tempDir();
    const run = spawnSync(process.execPath, [join(import.meta.dirname, 'fake-electron/run-main.mjs'), MAIN, userData], { encoding: 'utf8', timeout: 60_000 });
    expect(run.status, run.stderr).toBe(0);
    const r = JSON.parse(run.stdout.trim().split('\n').at(-1)!);

    expect(r.schemes).toEqual([{ scheme: 'app', privileges: { standard: true, secure: true, supportFetchAPI: true, codeCache: true } }]);
    expect(r.channels).toEqual([...INVOKE_CHANNELS].sort());

    expect(r.window.url).toBe('app://memplan/index.html');
    expect(r.window.shown).toBe(true);
    expect(r.window.options.webPreferences).toMatchObject({ preload: join(ROOT, 'out/preload/preload.cjs'), contextIsolation: true, sandbox: true, nodeIntegration: false, webSecurity: true });
    expect(existsSync(r.window.options.webPreferences.preload)).toBe(true);

    expect(r.prevented).toEqual({ 'will-navigate': true, 'will-redirect': true, 'will-attach-webview': true });
    expect([r.openHttps, r.openFile]).toEqual([{ action: 'deny' }, { action: 'deny' }]);
    expect(r.openedExternal).toEqual(['https://pytorch.org/']);
    expect(r.permission).toEqual({ camera: false, check: false });

    expect(r.saved).toMatchObject({ ok: true, value: { name: 'wired', plan_valid: true } });
    expect(r.listed.value.plans.map((p: { name: string }) => p.name)).toEqual(['wired']);
    for (const refused of [r.fromSubframe, r.fromElsewhere, r.noFrame]) expect(refused).toMatchObject({ ok: false, error: { code: 'refused' } });
    expect(r.info.value).toMatchObject({ data_dir: userData, database_path: join(userData, 'plans.sqlite'), notices: [] });
    expect(existsSync(join(userData, 'plans.sqlite'))).toBe(true);
    expect(r.cancelledOpen).toEqual({ ok: true, value: null });

    expect(r.page).toEqual({ status: 200, csp: CONTENT_SECURITY_POLICY, type: 'text/html; charset=utf-8', body: '<!doctype html>' });
    for (const escape of r.escapes) {
      expect([403, 404], escape.path).toContain(escape.status);
      expect(escape.body).not.toMatch(/import|"name"/);
    }
    expect(r.otherHost).toBe(404);

    expect(r.sent).toEqual([['menu:command', 'save']]);
    expect(JSON.parse(readFileSync(join(userData, 'window-state.json'), 'utf8'))).toEqual({ x: 10, y: 20, width: 1440, height: 920, maximized: false });
    expect([r.errorBoxes, r.messageBoxes]).toEqual([[], []]);
  }, 90_000);
});
