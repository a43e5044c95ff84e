/**
 * Numbers, byte sizes and dates for the current locale. Byte sizes are IEC (KiB, MiB, GiB), as PyTorch prints
 * them, with the digits formatted by Intl (the unit labels are the same in Chinese, see the glossary).
 */
import type { Locale } from './types.ts';

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'] as const;

const numberFormats = new Map<string, Intl.NumberFormat>();
function numberFormat(locale: Locale, digits: number): Intl.NumberFormat {
  const key = `${locale}/${digits}`;
  let f = numberFormats.get(key);
  if (!f) {
    f = new Intl.NumberFormat(locale, { minimumFractionDigits: digits, maximumFractionDigits: digits });
    numberFormats.set(key, f);
  }
  return f;
}

/** "12.34 GiB", "512 B"; negative sizes keep their sign. */
export function formatBytes(bytes: number, locale: Locale, digits = 2): string {
  const sign = bytes < 0 ? '-' : '';
  let value = Math.abs(bytes);
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${sign}${numberFormat(locale, unit === 0 ? 0 : digits).format(value)} ${UNITS[unit]}`;
}

export function formatNumber(value: number, locale: Locale, digits = 0): string {
  return numberFormat(locale, digits).format(value);
}

/** "1.56B", "124M" style parameter counts; in Chinese 亿 / 万 would be usual, but model cards use M/B too. */
export function formatCount(value: number, locale: Locale): string {
  return new Intl.NumberFormat(locale, { notation: 'compact', maximumFractionDigits: 2 }).format(value);
}

export function formatPercent(fraction: number, locale: Locale, digits = 1): string {
  return new Intl.NumberFormat(locale, { style: 'percent', minimumFractionDigits: digits, maximumFractionDigits: digits }).format(fraction);
}

export function formatDate(ms: number | string, locale: Locale): string {
  const d = new Date(ms);
  if (Number.isNaN(d.getTime())) return '';
  const now = new Date();
  const sameDay = d.toDateString() === now.toDateString();
  return new Intl.DateTimeFormat(locale, sameDay ? { hour: '2-digit', minute: '2-digit' } : { year: 'numeric', month: 'short', day: 'numeric' }).format(d);
}

const GIB = 1024 ** 3;
export const bytesToGiB = (bytes: number): number => bytes / GIB;
export const gibToBytes = (gib: number): number => Math.round(gib * GIB);
