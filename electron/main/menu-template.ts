/**
 * The application menu as data (no Electron import: tested under Node). Commands go to the renderer over
 * `menu:command` (electron/common/channels.ts). The renderer already handles the keys of its own shortcuts
 * (renderer/src/lib/shortcuts.ts): those items show their keys but do not register them (`registerAccelerator:
 * false`), so a key press runs its command once.
 */
import type { MenuItemConstructorOptions } from 'electron';
import type { MenuCommand } from '../common/channels.ts';

export interface MenuContext {
  isMac: boolean;
  /** Development build: View has Reload and the developer tools. */
  isDev: boolean;
  send(command: MenuCommand): void;
  openDataFolder(): void;
}

export function menuTemplate({ isMac, isDev, send, openDataFolder }: MenuContext): MenuItemConstructorOptions[] {
  const command = (label: string, id: MenuCommand, accelerator?: string, rendererOwnsKey = false): MenuItemConstructorOptions => ({
    id,
    label,
    click: () => send(id),
    ...(accelerator ? { accelerator, registerAccelerator: !rendererOwnsKey } : {}),
  });
  const separator: MenuItemConstructorOptions = { type: 'separator' };
  return [
    ...(isMac ? [{ role: 'appMenu' } as MenuItemConstructorOptions] : []),
    {
      label: '&File',
      submenu: [
        command('New Plan', 'new', 'CmdOrCtrl+N', true),
        command('Open Plan File…', 'open-plan', 'CmdOrCtrl+O'),
        separator,
        command('Save', 'save', 'CmdOrCtrl+S', true),
        command('Save As…', 'save-as', 'CmdOrCtrl+Shift+S', true),
        {
          label: 'Export',
          submenu: [
            command('Plan File (JSON)…', 'export-plan', 'CmdOrCtrl+E'),
            command('Timeline (CSV)…', 'export-timeline-csv'),
            command('Chart (PNG)…', 'export-chart-png'),
            command('Report (Markdown)…', 'export-report'),
          ],
        },
        separator,
        command('Import config.json…', 'import-hf-config', 'CmdOrCtrl+I'),
        command('Open Memory Snapshot…', 'open-snapshot', 'CmdOrCtrl+Shift+O'),
        ...(isMac ? [] : [separator, { role: 'quit' } as MenuItemConstructorOptions]),
      ],
    },
    { role: 'editMenu' },
    {
      label: '&Plan',
      submenu: [
        command('Simulate', 'simulate', 'CmdOrCtrl+Enter', true),
        command('Find Max Batch', 'max-batch', 'CmdOrCtrl+B', true),
        separator,
        command('Search Saved Plans', 'search', 'CmdOrCtrl+F', true),
      ],
    },
    {
      label: '&View',
      submenu: [
        ...(isDev ? [{ role: 'reload' }, { role: 'forceReload' }, { role: 'toggleDevTools' }, separator] : []),
        command('Toggle Dark Theme', 'toggle-theme'),
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
      label: '&Help',
      submenu: [{ label: 'Open Data Folder', click: () => openDataFolder() }, ...(isMac ? [] : [separator, { role: 'about' } as MenuItemConstructorOptions])],
    },
  ];
}
