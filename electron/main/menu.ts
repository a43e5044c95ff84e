/**
 * The application menu (menu-template.ts), its commands sent to the focused window's renderer. It starts in the
 * system's language and is rebuilt in the interface's whenever the renderer reports it (`app.setLocale`).
 */
import { app, BrowserWindow, Menu, shell } from 'electron';
import { MENU_COMMAND_CHANNEL } from '../common/channels.ts';
import type { LocaleChoice, MenuLocale } from '../common/ipc.ts';
import { menuTemplate } from './menu-template.ts';

export interface AppMenu {
  setLocale(locale: MenuLocale, choice: LocaleChoice): void;
}

export function setupMenu({ isDev }: { isDev: boolean }): AppMenu {
  app.setAboutPanelOptions({ applicationName: 'memplan', applicationVersion: app.getVersion(), copyright: 'MIT License' });
  const build = (locale: MenuLocale, localeChoice: LocaleChoice) => {
    const template = menuTemplate({
      isMac: process.platform === 'darwin',
      isDev,
      locale,
      localeChoice,
      send: (command) => {
        const window = BrowserWindow.getFocusedWindow() ?? BrowserWindow.getAllWindows()[0];
        window?.webContents.send(MENU_COMMAND_CHANNEL, command);
      },
      openDataFolder: () => void shell.openPath(app.getPath('userData')),
    });
    Menu.setApplicationMenu(Menu.buildFromTemplate(template));
  };
  // Any Chinese is Simplified Chinese, as in the renderer (renderer/src/i18n/index.ts localeFor).
  build(app.getLocale().toLowerCase().startsWith('zh') ? 'zh-CN' : 'en', 'system');
  return { setLocale: build };
}
