import { readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { InputError, InputIssuesError, safeParseJson } from '../engine/index.ts';

/**
 * A path as the user typed it, resolved from the folder they typed it in. `npm run memplan -- simulate ../x.json`
 * runs the command in the repository root; npm records the folder it was started from in INIT_CWD. Only for our
 * own script: INIT_CWD is inherited by everything an npm script starts (a test run spawning memplan elsewhere).
 */
export function userPath(path: string): string {
  const fromNpmRun = process.env['npm_lifecycle_event'] === 'memplan' && process.env['INIT_CWD'];
  return isAbsolute(path) ? path : resolve(fromNpmRun || process.cwd(), path);
}

/** How a file that could not be read is named: as typed, with the full path tried for a relative one. */
function triedLabel(path: string): string {
  return isAbsolute(path) ? path : `${path} (${userPath(path)})`;
}

/** Reads a file the user named; a missing or unreadable file is their mistake (exit 2), not a crash. */
export function readUserFile(path: string): Uint8Array {
  try {
    return readFileSync(userPath(path));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'is a directory' : code === 'EACCES' ? 'permission denied' : String((error as Error).message);
    throw new InputError(triedLabel(path), why);
  }
}

/** A JSON file the user named, as a value; not JSON is an error naming the file. */
export function readJsonFile(path: string): unknown {
  const json = safeParseJson(new TextDecoder().decode(readUserFile(path)), path);
  if (!json.ok) throw new InputIssuesError(json.issues);
  return json.value;
}
