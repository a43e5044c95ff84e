/**
 * Byte sizes in IEC units (KiB, MiB, GiB: powers of 1024, as PyTorch's own messages print them) and percentages,
 * formatted by `Intl` for the interface's locale, plus the "nice" byte ticks the charts' axes use.
 */

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'] as const;
export type ByteUnit = (typeof UNITS)[number];

/** The IEC unit a size reads best in: the largest whose value is at least 1. */
export function unitFor(bytes: number): { unit: ByteUnit; factor: number } {
  let i = 0;
  let factor = 1;
  while (i < UNITS.length - 1 && Math.abs(bytes) >= factor * 1024) {
    factor *= 1024;
    i++;
  }
  return { unit: UNITS[i]!, factor };
}

const numberFormats = new Map<string, Intl.NumberFormat>();
function numberFormat(locale: string, minimumFractionDigits: number, maximumFractionDigits: number, signDisplay: 'auto' | 'exceptZero' = 'auto'): Intl.NumberFormat {
  const key = `${locale}|${minimumFractionDigits}|${maximumFractionDigits}|${signDisplay}`;
  let f = numberFormats.get(key);
  if (!f) {
    f = new Intl.NumberFormat(locale, { minimumFractionDigits, maximumFractionDigits, signDisplay });
    numberFormats.set(key, f);
  }
  return f;
}

export interface ByteFormatOptions {
  /** Fraction digits (default 2, as torch.cuda.memory_summary's callers usually print; bytes never get any). */
  digits?: number;
  /** Keep trailing zeros (default true: columns of numbers line up). */
  fixed?: boolean;
  /** Show "+" on positive values (differences). */
  signed?: boolean;
  /** Format in this unit instead of the one the size reads best in. */
  unit?: ByteUnit;
}

/** `formatBytes(8082423808, 'en')` → "7.53 GiB"; `formatBytes(512, 'en')` → "512 B". */
export function formatBytes(bytes: number, locale: string, options: ByteFormatOptions = {}): string {
  const { unit, factor } = options.unit ? { unit: options.unit, factor: 1024 ** UNITS.indexOf(options.unit) } : unitFor(bytes);
  const digits = unit === 'B' ? 0 : (options.digits ?? 2);
  const f = numberFormat(locale, options.fixed === false ? 0 : digits, digits, options.signed ? 'exceptZero' : 'auto');
  return `${f.format(bytes / factor)}\u00a0${unit}`;
}

/** `formatPercent(0.0958, 'en')` → "9.6%". */
export function formatPercent(fraction: number, locale: string, options: { digits?: number; signed?: boolean } = {}): string {
  const digits = options.digits ?? 1;
  return new Intl.NumberFormat(locale, {
    style: 'percent',
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
    signDisplay: options.signed ? 'exceptZero' : 'auto',
  }).format(fraction);
}

/** An integer with the locale's grouping: 124,439,808. */
export function formatCount(n: number, locale: string): string {
  return numberFormat(locale, 0, 0).format(n);
}

/**
 * Axis ticks at round sizes in one IEC unit (0, 10, 20 GiB; 0, 256, 512 MiB ...): steps of 1, 2, 2.5, 5 × 10^k of
 * the unit the range reads in, about `count` of them.
 */
export function byteTicks(min: number, max: number, count = 6): number[] {
  const range = Math.max(1, max - min);
  const { factor } = unitFor(range / 2);
  const raw = range / factor / Math.max(1, count);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = ([1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag) * factor;
  const out: number[] = [];
  for (let v = Math.ceil(min / step) * step; v <= max + step * 1e-9; v += step) out.push(v);
  return out;
}

/** A tick label: the unit chosen for the whole axis, digits only where the step needs them. */
export function formatByteTick(bytes: number, ticks: readonly number[], locale: string): string {
  const top = Math.max(...ticks.map(Math.abs), 1);
  const { unit, factor } = unitFor(top / 2); // the unit byteTicks chose its step in
  const step = ticks.length > 1 ? Math.abs(ticks[1]! - ticks[0]!) / factor : 1;
  const digits = step >= 1 || unit === 'B' ? 0 : step >= 0.1 ? 1 : 2;
  return `${numberFormat(locale, digits, digits).format(bytes / factor)}\u00a0${unit}`;
}
