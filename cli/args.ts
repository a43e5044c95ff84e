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
    return parseArgs({ args: joined, options, allowPositionals: true, strict: true });
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
