/**
 * The two preferences the app remembers in localStorage: the interface language (the system's unless the user
 * picked one) and the theme (the system's light or dark unless overridden).
 */
import { catalogues, localeFor, type Locale, type Messages } from '../i18n/index.ts';

export type LocaleChoice = 'system' | Locale;
export type ThemeChoice = 'system' | 'light' | 'dark';

const LOCALE_KEY = 'memplan.locale';
const THEME_KEY = 'memplan.theme';

function stored<T extends string>(key: string, allowed: readonly T[], fallback: T): T {
  try {
    const v = localStorage.getItem(key);
    return allowed.includes(v as T) ? (v as T) : fallback;
  } catch {
    return fallback;
  }
}

function store(key: string, value: string): void {
  try {
    localStorage.setItem(key, value);
  } catch {
    // Storage can be unavailable (private mode); the choice then lasts this session.
  }
}

export class Settings {
  localeChoice = $state<LocaleChoice>(stored(LOCALE_KEY, ['system', 'en', 'zh-CN'], 'system'));
  themeChoice = $state<ThemeChoice>(stored(THEME_KEY, ['system', 'light', 'dark'], 'system'));
  #systemLocale = $state<Locale>(localeFor(typeof navigator === 'undefined' ? undefined : navigator.language));
  #systemDark = $state(false);

  locale: Locale = $derived(this.localeChoice === 'system' ? this.#systemLocale : this.localeChoice);
  /** The current locale's messages: `settings.m.save`, `settings.m.batchOf(8)`. */
  m: Messages = $derived(catalogues[this.locale]);
  theme: 'light' | 'dark' = $derived(this.themeChoice === 'system' ? (this.#systemDark ? 'dark' : 'light') : this.themeChoice);

  constructor() {
    if (typeof window === 'undefined') return;
    const dark = window.matchMedia('(prefers-color-scheme: dark)');
    this.#systemDark = dark.matches;
    dark.addEventListener('change', (e) => (this.#systemDark = e.matches));
    window.addEventListener('languagechange', () => (this.#systemLocale = localeFor(navigator.language)));
  }

  setLocale(choice: LocaleChoice): void {
    this.localeChoice = choice;
    store(LOCALE_KEY, choice);
  }

  setTheme(choice: ThemeChoice): void {
    this.themeChoice = choice;
    store(THEME_KEY, choice);
  }
}

export const settings = new Settings();
