import { parseArgs, type ParseArgsConfig } from 'node:util';
import { InputError } from '../engine/index.ts';

type Options = NonNullable<ParseArgsConfig['options']>;

/** `util.parseArgs` with its errors turned into InputError (exit 2), and integer options checked. */
export function parseCommandArgs(command: string, args: string[], options: Options) {
  // `--memory-limit-bytes -5`: a negative number is the option's value (to be refused by its own check with a clear
  // message), not an unknown option "-5".
  const joined: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const name = args[i]!.startsWith('--') ? args[i]!.slice(2) : '';
    const next = args[i + 1];
    if (options[name]?.type === 'string' && next !== undefined && /^-\d/.test(next)) {
      joined.push(`--${name}=${next}`);
      i++;
    } else joined.push(args[i]!);
  }
  try {
    return parseArgs({ args: joined, options, allowPositionals: true, allowNegative: true, strict: true });
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new InputError('', `memplan ${command}: ${message.replace(/\. To specify a positional.*$/s, '')}`);
  }
}

/**
 * Byte units as people type them: SI (kB, MB, GB, TB: powers of 1000, as disk and GPU spec sheets count) and IEC
 * (KiB, MiB, GiB, TiB: powers of 1024, as PyTorch's memory_summary and OOM messages count).
 */
const UNITS: Record<string, bigint> = {
  b: 1n,
  kb: 1000n,
  mb: 1000n ** 2n,
  gb: 1000n ** 3n,
  tb: 1000n ** 4n,
  kib: 1024n,
  mib: 1024n ** 2n,
  gib: 1024n ** 3n,
  tib: 1024n ** 4n,
};

/** The smallest segment PyTorch's allocator reserves (kSmallBuffer, 2 MiB): a cap below it can hold nothing. */
const kMinUsefulCapBytes = 2_097_152;

/**
 * A byte count typed by a user: `80GiB`, `80GB`, `81920MiB`, `1.5 GiB`, or plain bytes (`85899345920`). The
 * arithmetic is exact (BigInt): `0.1GB` is 100,000,000 bytes, and a size that is not a whole number of bytes is
 * refused rather than rounded.
 */
export function parseByteSize(flag: string, text: string): number {
  const m = /^\s*(\d+)(?:\.(\d+))?\s*([a-z]*)\s*$/i.exec(text);
  const accepted = 'a size such as 80GiB, 80GB, 81920MiB or a whole number of bytes';
  if (!m) throw new InputError(flag, `expected ${accepted}, got "${text}"`);
  const unitText = m[3]!;
  const unit = unitText === '' ? 1n : UNITS[unitText.toLowerCase()];
  if (unit === undefined) {
    const bare = /^([kmgt])$/i.exec(unitText);
    const hint = bare ? `; write ${m[1]}${m[2] ? `.${m[2]}` : ''}${bare[1]!.toUpperCase()}iB (powers of 1024) or ${m[1]}${m[2] ? `.${m[2]}` : ''}${bare[1]!.toUpperCase()}B (powers of 1000)` : '';
    throw new InputError(flag, `unknown unit "${unitText}" in "${text}"; accepted: B, kB, MB, GB, TB, KiB, MiB, GiB, TiB${hint}`);
  }
  const decimals = m[2] ?? '';
  const scaled = BigInt(m[1]! + decimals) * unit;
  const divisor = 10n ** BigInt(decimals.length);
  if (scaled % divisor !== 0n) throw new InputError(flag, `"${text}" is not a whole number of bytes`);
  const bytes = scaled / divisor;
  if (bytes > BigInt(Number.MAX_SAFE_INTEGER)) throw new InputError(flag, `"${text}" is too large`);
  return Number(bytes);
}

/**
 * A memory cap typed by a user (`--memory-limit 80GiB`): a byte size, positive, and at least one segment; a bare
 * small number is most likely gigabytes typed without a unit ("did you mean 80GiB?").
 */
export function parseMemoryCap(flag: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const bytes = parseByteSize(flag, text);
  if (bytes <= 0) throw new InputError(flag, `expected a positive size, got "${text}"`);
  if (bytes < kMinUsefulCapBytes) {
    const plainNumber = /^\s*\d+(\.\d+)?\s*$/.test(text);
    const hint = plainNumber ? `; did you mean ${text.trim()}GiB?` : '';
    throw new InputError(flag, `${bytes} bytes is less than the smallest segment PyTorch reserves (2 MiB): nothing could be allocated${hint}`);
  }
  return bytes;
}

/** `--memory-fraction F` as torch.cuda.set_per_process_memory_fraction takes it: 0 < F <= 1. */
export function parseFraction(flag: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const f = /^\s*(0|1)?(\.\d+)?\s*$/.test(text) && text.trim() !== '' && text.trim() !== '.' ? Number(text) : NaN;
  if (!(f > 0 && f <= 1)) throw new InputError(flag, `expected a fraction of the GPU's memory above 0 and at most 1 (as set_per_process_memory_fraction takes), got "${text}"`);
  return f;
}

/** A positive whole number typed by a user (`--multiple-of 8`). */
export function parsePositiveInteger(flag: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const n = /^\s*\d+\s*$/.test(text) ? Number(text) : NaN;
  if (!(Number.isSafeInteger(n) && n > 0)) throw new InputError(flag, `expected a positive whole number, got "${text}"`);
  return n;
}
