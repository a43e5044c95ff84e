/**
 * The application menu's words in each language the app speaks (the renderer's own catalogues are in
 * renderer/src/i18n; the main process cannot import them, and the menu is all it words). The renderer tells the
 * main process its language (`app.setLocale`), and the menu is rebuilt in it. A key missing in one language fails
 * the type-check (`satisfies Record<MenuLocale, MenuWords>`).
 */
import type { LocaleChoice, MenuLocale } from '../common/ipc.ts';

export interface MenuWords {
  file: string;
  newPlan: string;
  openPlan: string;
  save: string;
  saveAs: string;
  export: string;
  exportPlan: string;
  exportTimelineCsv: string;
  exportChartPng: string;
  exportReport: string;
  importHfConfig: string;
  openSnapshot: string;
  plan: string;
  simulate: string;
  maxBatch: string;
  search: string;
  view: string;
  toggleTheme: string;
  language: string;
  languageSystem: string;
  help: string;
  openDataFolder: string;
}

/** Each language's own name, as its speakers write it (the same in every menu). */
export const LANGUAGE_NAMES: Record<Exclude<LocaleChoice, 'system'>, string> = { en: 'English', 'zh-CN': '简体中文' };

export const MENU_WORDS = {
  en: {
    file: '&File',
    newPlan: 'New Plan',
    openPlan: 'Open Plan File…',
    save: 'Save',
    saveAs: 'Save As…',
    export: 'Export',
    exportPlan: 'Plan File (JSON)…',
    exportTimelineCsv: 'Timeline (CSV)…',
    exportChartPng: 'Chart (PNG)…',
    exportReport: 'Report (Markdown)…',
    importHfConfig: 'Import config.json…',
    openSnapshot: 'Open Memory Snapshot…',
    plan: '&Plan',
    simulate: 'Simulate',
    maxBatch: 'Find Max Batch',
    search: 'Search Saved Plans',
    view: '&View',
    toggleTheme: 'Toggle Dark Theme',
    language: 'Language',
    languageSystem: 'System Language',
    help: '&Help',
    openDataFolder: 'Open Data Folder',
  },
  'zh-CN': {
    file: '文件(&F)',
    newPlan: '新建方案',
    openPlan: '打开方案文件…',
    save: '保存',
    saveAs: '另存为…',
    export: '导出',
    exportPlan: '方案文件（JSON）…',
    exportTimelineCsv: '时间线（CSV）…',
    exportChartPng: '图表（PNG）…',
    exportReport: '报告（Markdown）…',
    importHfConfig: '导入 config.json…',
    openSnapshot: '打开显存快照…',
    plan: '方案(&P)',
    simulate: '模拟',
    maxBatch: '搜索最大 batch size',
    search: '搜索已保存的方案',
    view: '视图(&V)',
    toggleTheme: '切换深色主题',
    language: '语言',
    languageSystem: '跟随系统',
    help: '帮助(&H)',
    openDataFolder: '打开数据文件夹',
  },
} as const satisfies Record<MenuLocale, MenuWords>;
