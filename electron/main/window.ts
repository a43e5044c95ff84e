/** The one main window: secure options (security/window-options.ts), shown once painted, where it was last time. */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { app, BrowserWindow, nativeTheme, screen } from 'electron';
import { mainWindowOptions } from './security/window-options.ts';
import { restoreWindowState, serializeWindowState, WINDOW_STATE_FILE } from './window-state.ts';

function readText(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

export function createMainWindow({ url, preloadPath }: { url: string; preloadPath: string }): BrowserWindow {
  const statePath = join(app.getPath('userData'), WINDOW_STATE_FILE);
  const saved = restoreWindowState(readText(statePath), screen.getAllDisplays().map((d) => d.workArea));
  const window = new BrowserWindow({
    ...mainWindowOptions({ preloadPath, dark: nativeTheme.shouldUseDarkColors }),
    ...(saved ? { x: saved.x, y: saved.y, width: saved.width, height: saved.height } : {}),
  });
  window.once('ready-to-show', () => {
    if (saved?.maximized) window.maximize();
    window.show();
  });
  window.on('close', () => {
    try {
      writeFileSync(statePath, serializeWindowState(window.getNormalBounds(), window.isMaximized()));
    } catch {
      // Not worth a dialog: the window opens at its default place next time.
    }
  });
  void window.loadURL(url);
  return window;
}
