/** Running the memplan command as a user does, for the CLI tests. */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';

export const root = new URL('../../', import.meta.url).pathname;

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `node cli/memplan.ts ARGS` in `cwd` (default: the repository root), with extra environment variables. */
export function memplan(args: readonly string[], options: { cwd?: string; env?: Record<string, string | undefined> } = {}): Run {
  const env = { ...process.env, ...options.env };
  // a test run started by npm inherits npm's variables: the command must not act on them unless told to
  delete env['npm_lifecycle_event'];
  delete env['INIT_CWD'];
  Object.assign(env, options.env);
  const r = spawnSync(process.execPath, [join(root, 'cli/memplan.ts'), ...args], { encoding: 'utf8', cwd: options.cwd ?? root, env });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** A stack trace line (`at main (file.ts:12:3)`), which a user must never see for bad input. */
export const STACK_TRACE = /^\s+at .*[.:]\d+/m;

/** The command succeeded and printed one JSON object. */
export function json(args: readonly string[], options?: Parameters<typeof memplan>[1]): Record<string, unknown> {
  const r = memplan(args, options);
  expect(r.code, r.stderr).toBe(0);
  expect(r.stdout.trim().split('\n')).toHaveLength(1);
  return JSON.parse(r.stdout) as Record<string, unknown>;
}

/** The command refused its input: exit 2, one line a problem, no stack trace. Returns stderr. */
export function refused(args: readonly string[], options?: Parameters<typeof memplan>[1]): string {
  const r = memplan(args, options);
  expect(r.code, r.stdout + r.stderr).toBe(2);
  expect(r.stderr).not.toMatch(STACK_TRACE);
  expect(r.stderr).toMatch(/^memplan: /);
  return r.stderr.trim();
}

export const scratch = mkdtempSync(join(tmpdir(), 'memplan-cli-'));

/** A plan file in the scratch folder. */
export function planFile(name: string, plan: object): string {
  const path = join(scratch, name);
  writeFileSync(path, JSON.stringify(plan));
  return path;
}
