import { describe, expect, it } from 'vitest';
import type { MenuItemConstructorOptions } from 'electron';
import { MENU_COMMANDS, type MenuCommand } from '../../electron/common/channels.ts';
import type { LocaleChoice, MenuLocale } from '../../electron/common/ipc.ts';
import { menuTemplate } from '../../electron/main/menu-template.ts';
import { MENU_WORDS } from '../../electron/main/menu-words.ts';

function items(template: MenuItemConstructorOptions[]): MenuItemConstructorOptions[] {
  return template.flatMap((item) => [item, ...(Array.isArray(item.submenu) ? items(item.submenu) : [])]);
}

function build(isMac: boolean, isDev: boolean, locale: MenuLocale = 'en', localeChoice: LocaleChoice = 'system') {
  const sent: MenuCommand[] = [];
  let openedData = 0;
  const template = menuTemplate({ isMac, isDev, locale, localeChoice, send: (c) => sent.push(c), openDataFolder: () => openedData++ });
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

  it('speaks Chinese when the interface does, every label of its own translated', () => {
    const labels = (locale: MenuLocale) => build(false, false, locale).all.map((i) => i.label).filter((l): l is string => !!l);
    const en = labels('en');
    const zh = labels('zh-CN');
    expect(zh.length).toBe(en.length);
    expect(zh).toContain('文件(&F)');
    // Only the language names (each written in its own language) and file-format names stay as they are.
    const same = zh.filter((label, i) => label === en[i]);
    expect(same).toEqual(['English', '简体中文']);
    for (const [key, text] of Object.entries(MENU_WORDS['zh-CN'])) expect(text, key).toMatch(/[\u4e00-\u9fff]/);
  });

  it('checks the chosen language under View > Language and sends the choice', () => {
    const menu = build(false, false, 'zh-CN', 'zh-CN');
    const radios = menu.all.filter((i) => i.type === 'radio');
    expect(radios.map((i) => [i.id, i.checked])).toEqual([
      ['locale-system', false],
      ['locale-en', false],
      ['locale-zh-CN', true],
    ]);
    (radios[1]!.click as () => void)();
    expect(menu.sent).toEqual(['locale-en']);
    expect(build(false, false, 'en', 'system').all.find((i) => i.id === 'locale-system')?.checked).toBe(true);
  });
});
