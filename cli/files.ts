import { readFileSync } from 'node:fs';
import { InputError, parsePlanText, type Plan } from '../engine/index.ts';
import { gpuCatalog } from './gpus.ts';

/** Reads a file the user named; a missing or unreadable file is their mistake (exit 2), not a crash. */
export function readUserFile(path: string): Uint8Array {
  try {
    return readFileSync(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'is a directory' : code === 'EACCES' ? 'permission denied' : String((error as Error).message);
    throw new InputError(path, why);
  }
}

/** A plan file the user named, read and checked (docs/plan-format.md). */
export function readPlanFile(path: string): Plan {
  return parsePlanText(new TextDecoder().decode(readUserFile(path)), path, { catalog: gpuCatalog() });
}
