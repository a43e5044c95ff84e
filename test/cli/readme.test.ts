/**
 * Every `memplan` command in the README's shell blocks runs from the repository as a fresh clone has it: exit 0,
 * no stack trace, no error output (issue 13). Excluded: commands in prose with placeholders (`PLAN`,
 * `my_snapshot.pickle`: the user's own files), which are not in shell blocks.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { STACK_TRACE, memplan, root } from './support.ts';

const readme = readFileSync(join(root, 'README.md'), 'utf8');

/** The arguments of each `npm run memplan -- ...` or `memplan ...` line of a ```sh block. */
function readmeCommands(): string[][] {
  const commands: string[][] = [];
  for (const block of readme.matchAll(/```sh\n([\s\S]*?)```/g)) {
    for (const raw of block[1]!.split('\n')) {
      const line = raw.replace(/\s+#.*$/, '').trim();
      const m = /^(?:npm run memplan --|memplan)(?:\s+(.*))?$/.exec(line);
      if (m) commands.push((m[1] ?? '').split(/\s+/).filter(Boolean));
    }
  }
  return commands;
}

describe('the README', () => {
  const commands = readmeCommands();

  it('has memplan commands for every subcommand', () => {
    const subcommands = new Set(commands.map((c) => c[0]));
    for (const name of ['simulate', 'max-batch', 'replay', 'gpus', 'presets', '--help']) expect(subcommands, name).toContain(name);
  });

  for (const args of commands) {
    it(`memplan ${args.join(' ')}`, () => {
      const r = memplan(args);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toBe('');
      expect(r.stdout).not.toMatch(STACK_TRACE);
      expect(r.stdout.length).toBeGreaterThan(0);
      if (args.includes('--json')) JSON.parse(r.stdout);
    }, 120_000);
  }
});
