/**
 * The main process, as a list of setup steps. Everything with logic lives in modules that import nothing from
 * Electron (storage/, handlers/, security/, menu-template.ts) and is tested under Node (test/electron/); the
 * files here only connect them to Electron.
 *
 * Built by electron-vite into out/main/index.js, next to out/preload/preload.cjs and out/renderer/.
 */
import { join } from 'node:path';
import { app, BrowserWindow } from 'electron';
import type { AppInfo } from '../common/ipc.ts';
import { electronDialogs } from './dialogs.ts';
import { createHandlers } from './handlers/handlers.ts';
import { setupIpc } from './ipc.ts';
import { setupMenu } from './menu.ts';
import { registerAppScheme, setupProtocol } from './protocol.ts';
import { setupSecurity } from './security.ts';
import { APP_ENTRY_URL, isAppUrl } from './security/origin.ts';
import { setupStorage, tellAboutStorage } from './storage-setup.ts';
import type { Storage } from './storage/index.ts';
import { createMainWindow } from './window.ts';

const PRELOAD_PATH = join(import.meta.dirname, '../preload/preload.cjs');
const RENDERER_DIR = join(import.meta.dirname, '../renderer');
/** `electron-vite dev` serves the renderer with hot reload; a packaged app never uses it. */
const DEV_SERVER_URL = app.isPackaged ? undefined : process.env['ELECTRON_RENDERER_URL'];
/** An unpackaged build can keep its plans elsewhere (the Electron launch test uses a temp folder). */
const DATA_DIR_OVERRIDE = app.isPackaged ? undefined : process.env['MEMPLAN_USER_DATA_DIR'];

function isTrustedSender(url: string | undefined): boolean {
  return isAppUrl(url) || (DEV_SERVER_URL !== undefined && url !== undefined && url.startsWith(`${new URL(DEV_SERVER_URL).origin}/`));
}

function appInfo(storage: Storage): AppInfo {
  return {
    name: app.getName(),
    version: app.getVersion(),
    electron_version: process.versions.electron ?? null,
    platform: process.platform,
    data_dir: app.getPath('userData'),
    database_path: storage.path,
    notices: storage.notices,
  };
}

function openWindow(): BrowserWindow {
  return createMainWindow({ url: DEV_SERVER_URL ?? APP_ENTRY_URL, preloadPath: PRELOAD_PATH });
}

function setupSingleInstance(): boolean {
  if (!app.requestSingleInstanceLock()) return false;
  app.on('second-instance', () => {
    const window = BrowserWindow.getAllWindows()[0];
    if (window?.isMinimized()) window.restore();
    window?.focus();
  });
  return true;
}

function setupLifecycle(storage: Storage): void {
  app.on('window-all-closed', () => {
    if (process.platform !== 'darwin') app.quit();
  });
  app.on('activate', () => {
    if (BrowserWindow.getAllWindows().length === 0) openWindow();
  });
  app.on('will-quit', () => storage.close());
}

if (DATA_DIR_OVERRIDE) app.setPath('userData', DATA_DIR_OVERRIDE);
registerAppScheme();
if (!setupSingleInstance()) {
  app.quit();
} else {
  void app.whenReady().then(() => {
    setupSecurity();
    setupProtocol(RENDERER_DIR);
    const storage = setupStorage();
    const menu = setupMenu({ isDev: !app.isPackaged });
    setupIpc(
      createHandlers({
        plans: storage.plans,
        comparisons: storage.comparisons,
        snapshots: storage.snapshots,
        dialogs: electronDialogs,
        info: () => appInfo(storage),
        setMenuLocale: menu.setLocale,
      }),
      isTrustedSender,
    );
    setupLifecycle(storage);
    const window = openWindow();
    // After the window's own ready-to-show listener (window.ts) has shown it: a dialog needs a visible parent.
    window.once('ready-to-show', () => tellAboutStorage(window, storage.notices));
  });
}
