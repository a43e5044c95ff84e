/**
 * The application menu as data (no Electron import: tested under Node). Commands go to the renderer over
 * `menu:command` (electron/common/channels.ts). The renderer already handles the keys of its own shortcuts
 * (renderer/src/lib/shortcuts.ts): those items show their keys but do not register them (`registerAccelerator:
 * false`), so a key press runs its command once.
 */
import type { MenuItemConstructorOptions } from 'electron';
import type { MenuCommand } from '../common/channels.ts';
import type { LocaleChoice, MenuLocale } from '../common/ipc.ts';
import { LANGUAGE_NAMES, MENU_WORDS } from './menu-words.ts';

export interface MenuContext {
  isMac: boolean;
  /** Development build: View has Reload and the developer tools. */
  isDev: boolean;
  /** The interface's language (the menu speaks it) and the user's choice (checked under View > Language). */
  locale: MenuLocale;
  localeChoice: LocaleChoice;
  send(command: MenuCommand): void;
  openDataFolder(): void;
}

export function menuTemplate({ isMac, isDev, locale, localeChoice, send, openDataFolder }: MenuContext): MenuItemConstructorOptions[] {
  const w = MENU_WORDS[locale];
  const command = (label: string, id: MenuCommand, accelerator?: string, rendererOwnsKey = false): MenuItemConstructorOptions => ({
    id,
    label,
    click: () => send(id),
    ...(accelerator ? { accelerator, registerAccelerator: !rendererOwnsKey } : {}),
  });
  const separator: MenuItemConstructorOptions = { type: 'separator' };
  const language = (choice: LocaleChoice, label: string): MenuItemConstructorOptions => ({
    id: `locale-${choice}`,
    label,
    type: 'radio',
    checked: choice === localeChoice,
    click: () => send(`locale-${choice}`),
  });
  return [
    ...(isMac ? [{ role: 'appMenu' } as MenuItemConstructorOptions] : []),
    {
      label: w.file,
      submenu: [
        command(w.newPlan, 'new', 'CmdOrCtrl+N', true),
        command(w.openPlan, 'open-plan', 'CmdOrCtrl+O'),
        separator,
        command(w.save, 'save', 'CmdOrCtrl+S', true),
        command(w.saveAs, 'save-as', 'CmdOrCtrl+Shift+S', true),
        {
          label: w.export,
          submenu: [
            command(w.exportPlan, 'export-plan', 'CmdOrCtrl+E'),
            command(w.exportTimelineCsv, 'export-timeline-csv'),
            command(w.exportChartPng, 'export-chart-png'),
            command(w.exportReport, 'export-report'),
          ],
        },
        separator,
        command(w.importHfConfig, 'import-hf-config', 'CmdOrCtrl+I'),
        command(w.openSnapshot, 'open-snapshot', 'CmdOrCtrl+Shift+O'),
        ...(isMac ? [] : [separator, { role: 'quit' } as MenuItemConstructorOptions]),
      ],
    },
    { role: 'editMenu' },
    {
      label: w.plan,
      submenu: [
        command(w.simulate, 'simulate', 'CmdOrCtrl+Enter', true),
        command(w.maxBatch, 'max-batch', 'CmdOrCtrl+B', true),
        separator,
        command(w.search, 'search', 'CmdOrCtrl+F', true),
      ],
    },
    {
      label: w.view,
      submenu: [
        ...(isDev ? [{ role: 'reload' }, { role: 'forceReload' }, { role: 'toggleDevTools' }, separator] : []),
        command(w.toggleTheme, 'toggle-theme'),
        { label: w.language, submenu: [language('system', w.languageSystem), separator, language('en', LANGUAGE_NAMES.en), language('zh-CN', LANGUAGE_NAMES['zh-CN'])] },
        separator,
        { role: 'resetZoom' },
        { role: 'zoomIn' },
        { role: 'zoomOut' },
        separator,
        { role: 'togglefullscreen' },
      ] as MenuItemConstructorOptions[],
    },
    ...(isMac ? [{ role: 'windowMenu' } as MenuItemConstructorOptions] : []),
    {
      role: 'help',
      label: w.help,
      submenu: [{ label: w.openDataFolder, click: () => openDataFolder() }, ...(isMac ? [] : [separator, { role: 'about' } as MenuItemConstructorOptions])],
    },
  ];
}
