/**
 * The main window's options: Electron's secure defaults spelled out (they are the defaults today; writing them
 * down keeps a future edit or an Electron upgrade from weakening them silently), checked by
 * test/electron/window-options.test.ts.
 */
import type { BrowserWindowConstructorOptions } from 'electron';

export const MIN_WINDOW_WIDTH = 960;
export const MIN_WINDOW_HEIGHT = 640;

export function mainWindowOptions({ preloadPath, dark }: { preloadPath: string; dark: boolean }): BrowserWindowConstructorOptions {
  return {
    width: 1440,
    height: 920,
    minWidth: MIN_WINDOW_WIDTH,
    minHeight: MIN_WINDOW_HEIGHT,
    title: 'memplan',
    // Shown on ready-to-show, so the window never flashes white before the first paint.
    show: false,
    backgroundColor: dark ? '#14161a' : '#f7f7f5',
    webPreferences: {
      preload: preloadPath,
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
      nodeIntegrationInWorker: false,
      nodeIntegrationInSubFrames: false,
      webSecurity: true,
      allowRunningInsecureContent: false,
      experimentalFeatures: false,
      webviewTag: false,
      navigateOnDragDrop: false,
      spellcheck: false,
      safeDialogs: true,
    },
  };
}

/** Permission requests and checks (camera, notifications, clipboard-read, ...): the app needs none but copying
 * text (a memory_summary, a plan) with navigator.clipboard.writeText. */
export function allowPermission(permission: string): boolean {
  return permission === 'clipboard-sanitized-write';
}

/** Where a link the user clicks may open: https pages, in the system browser (never inside the app). */
export function isExternalLinkAllowed(url: string): boolean {
  try {
    return new URL(url).protocol === 'https:';
  } catch {
    return false;
  }
}
