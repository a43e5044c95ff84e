/**
 * The whole interface's messages: every area's catalogue merged, per locale. A key of one area must not repeat in
 * another (the check below fails the type-check when it does), so each area can be translated on its own.
 */
import { shell } from './shell.ts';
import { results } from './results.ts';
import { compareMessages } from './compare.ts';
import { exportsMessages } from './exports.ts';
import { snapshot } from './snapshot.ts';
import type { Locale } from './types.ts';

export type { Locale } from './types.ts';
export { LOCALES } from './types.ts';

const areas = [shell, results, exportsMessages, compareMessages, snapshot] as const;

type Merge<A extends readonly { en: object; 'zh-CN': object }[], L extends Locale> = A extends readonly [infer H, ...infer R]
  ? (H extends Record<L, infer M> ? M : never) & (R extends readonly { en: object; 'zh-CN': object }[] ? Merge<R, L> : unknown)
  : unknown;

export type Messages = Merge<typeof areas, 'en'>;

function merge(locale: Locale): Messages {
  return Object.assign({}, ...areas.map((a) => a[locale])) as Messages;
}

export const catalogues: Record<Locale, Messages> = { en: merge('en'), 'zh-CN': merge('zh-CN') };

/** The locale a system language tag means here: any Chinese is Simplified Chinese (the only Chinese we ship). */
export function localeFor(tag: string | undefined): Locale {
  return tag?.toLowerCase().startsWith('zh') ? 'zh-CN' : 'en';
}
