/** The application menu (menu-template.ts), its commands sent to the focused window's renderer. */
import { app, BrowserWindow, Menu, shell } from 'electron';
import { MENU_COMMAND_CHANNEL } from '../common/channels.ts';
import { menuTemplate } from './menu-template.ts';

export function setupMenu({ isDev }: { isDev: boolean }): void {
  app.setAboutPanelOptions({ applicationName: 'memplan', applicationVersion: app.getVersion(), copyright: 'MIT License' });
  const template = menuTemplate({
    isMac: process.platform === 'darwin',
    isDev,
    send: (command) => {
      const window = BrowserWindow.getFocusedWindow() ?? BrowserWindow.getAllWindows()[0];
      window?.webContents.send(MENU_COMMAND_CHANNEL, command);
    },
    openDataFolder: () => void shell.openPath(app.getPath('userData')),
  });
  Menu.setApplicationMenu(Menu.buildFromTemplate(template));
}
