import { parseArgs, type ParseArgsConfig } from 'node:util';
import { InputError } from '../engine/errors.ts';

type Options = NonNullable<ParseArgsConfig['options']>;

/** `util.parseArgs` with its errors turned into InputError (exit 2), and integer options checked. */
export function parseCommandArgs(command: string, args: string[], options: Options) {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new InputError('', `memplan ${command}: ${message.replace(/\. To specify a positional.*$/s, '')}`);
  }
}

/** A non-negative whole number of bytes given on the command line, e.g. `--memory-limit-bytes 8589934592`. */
export function parseByteCount(flag: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(Number(text)) || Number(text) <= 0) {
    throw new InputError(flag, `expected a positive whole number of bytes, got "${text}"`);
  }
  return Number(text);
}
