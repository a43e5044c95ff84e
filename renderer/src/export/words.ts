/**
 * What the reports say, in the app's language: the result views' messages (i18n/results.ts, so a report names
 * the numbers as the app does) and the exports' own (i18n/exports.ts), with the number formats of the locale.
 * Pure (no DOM).
 */
import type { Locale } from '../i18n/types.ts';
import { exportsMessages, type ExportMessages } from '../i18n/exports.ts';
import { messagesFor, type M } from '../results/words.ts';
import { formatBytes, formatCount, formatPercent } from '../charts/units.ts';

export interface ReportWords {
  r: M;
  x: ExportMessages;
  locale: Locale;
  bytes(n: number): string;
  signedBytes(n: number): string;
  count(n: number): string;
  /** A share, one decimal unless `digits` says more (PEFT's trainable% has four). */
  percent(fraction: number, digits?: number): string;
  signedPercent(fraction: number): string;
  /** The date and time a report was written, in the locale's long form with the time zone. */
  date(at: Date): string;
}

export function reportWords(locale: Locale): ReportWords {
  return {
    r: messagesFor(locale),
    x: exportsMessages[locale] as ExportMessages,
    locale,
    bytes: (n) => formatBytes(n, locale),
    signedBytes: (n) => formatBytes(n, locale, { signed: true }),
    count: (n) => formatCount(n, locale),
    percent: (f, digits) => formatPercent(f, locale, digits === undefined ? {} : { digits }),
    signedPercent: (f) => formatPercent(f, locale, { signed: true }),
    date: (at) => new Intl.DateTimeFormat(locale, { dateStyle: 'long', timeStyle: 'long', timeZone: 'UTC' }).format(at),
  };
}

/** An image of a chart saved beside the report: its file name (a plain name, no folder) and what it shows. */
export interface ReportImage {
  file: string;
  alt: string;
}
