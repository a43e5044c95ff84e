import { describe, expect, it } from 'vitest';
import type { MenuItemConstructorOptions } from 'electron';
import { MENU_COMMANDS, type MenuCommand } from '../../electron/common/channels.ts';
import { menuTemplate } from '../../electron/main/menu-template.ts';

function items(template: MenuItemConstructorOptions[]): MenuItemConstructorOptions[] {
  return template.flatMap((item) => [item, ...(Array.isArray(item.submenu) ? items(item.submenu) : [])]);
}

function build(isMac: boolean, isDev: boolean) {
  const sent: MenuCommand[] = [];
  let openedData = 0;
  const template = menuTemplate({ isMac, isDev, send: (c) => sent.push(c), openDataFolder: () => openedData++ });
  return { template, all: items(template), sent, openedData: () => openedData };
}

describe('the application menu', () => {
  it('has File, Edit, Plan, View, Help (and the app and Window menus on macOS)', () => {
    expect(build(false, false).template.map((m) => m.label ?? m.role)).toEqual(['&File', 'editMenu', '&Plan', '&View', '&Help']);
    expect(build(true, false).template.map((m) => m.label ?? m.role)).toEqual(['appMenu', '&File', 'editMenu', '&Plan', '&View', 'windowMenu', '&Help']);
  });

  it('sends every menu command to the renderer, each from one item', () => {
    const { all, sent } = build(false, false);
    const commandItems = all.filter((i) => MENU_COMMANDS.includes(i.id as MenuCommand));
    expect(commandItems.map((i) => i.id).sort()).toEqual([...MENU_COMMANDS].sort());
    for (const item of commandItems) (item.click as () => void)();
    expect(sent).toEqual(commandItems.map((i) => i.id));
  });

  it('shows the keys of the renderer’s own shortcuts without taking them (no double run)', () => {
    const byId = new Map(build(false, false).all.map((i) => [i.id, i]));
    for (const id of ['new', 'save', 'save-as', 'simulate', 'max-batch', 'search']) {
      expect(byId.get(id)?.accelerator, id).toBeTruthy();
      expect(byId.get(id)?.registerAccelerator, id).toBe(false);
    }
    expect(byId.get('open-plan')).toMatchObject({ accelerator: 'CmdOrCtrl+O', registerAccelerator: true });
  });

  it('has Reload and the developer tools only in development', () => {
    const roles = (isDev: boolean) => build(false, isDev).all.map((i) => i.role).filter(Boolean);
    expect(roles(false)).not.toContain('reload');
    expect(roles(false)).not.toContain('toggleDevTools');
    expect(roles(true)).toEqual(expect.arrayContaining(['reload', 'forceReload', 'toggleDevTools']));
    expect(roles(false)).toEqual(expect.arrayContaining(['zoomIn', 'zoomOut', 'resetZoom', 'quit', 'about']));
  });

  it('opens the data folder from Help', () => {
    const menu = build(false, false);
    (menu.all.find((i) => i.label === 'Open Data Folder')!.click as () => void)();
    expect(menu.openedData()).toBe(1);
  });
});
