/**
 * The message catalogues' shape. Each area (shell.ts, results.ts) defines its English messages as an object of
 * strings and functions, and its Chinese ones as a `Translation` of that object: a key missing in zh-CN, or a
 * function taking other parameters, fails svelte-check. index.ts merges the areas.
 */
export type Locale = 'en' | 'zh-CN';
export const LOCALES: readonly Locale[] = ['en', 'zh-CN'];

export type Message = string | ((...args: never[]) => string);

/** The same keys as the English catalogue, each a string or a function of the same parameters. */
export type Translation<T extends Record<string, Message>> = {
  [K in keyof T]: T[K] extends (...args: infer A) => string ? (...args: A) => string : string;
};

/** One area's messages in every locale. */
export interface Catalogue<T extends Record<string, Message>> {
  en: T;
  'zh-CN': Translation<T>;
}

export function defineMessages<T extends Record<string, Message>>(en: T, zh: Translation<NoInfer<T>>): Catalogue<T> {
  return { en, 'zh-CN': zh };
}
