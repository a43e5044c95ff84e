/**
 * The published package works without its dev dependencies: `npm pack`, installed into an empty folder with
 * `--omit=dev`, runs `memplan simulate`. Every import the built CLI makes at run time must be a dependency
 * (zod was once a dev dependency only, and an install without dev dependencies failed to start).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../..');
const work = mkdtempSync(join(tmpdir(), 'memplan-pack-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** npm as this process's Node runs it (npm_execpath is set inside npm scripts; fall back to the npm on PATH). */
function npm(args: string[], cwd: string): string {
  const npmCli = process.env.npm_execpath;
  const env = { ...process.env, npm_config_fund: 'false', npm_config_audit: 'false', npm_config_update_notifier: 'false' };
  return npmCli && npmCli.endsWith('.js')
    ? execFileSync(process.execPath, [npmCli, ...args], { cwd, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
    : execFileSync('npm', args, { cwd, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

describe('the packed package', () => {
  it('runs memplan simulate when installed without dev dependencies', () => {
    const tarball = npm(['pack', '--ignore-scripts', '--pack-destination', work, '--json'], root);
    const file = join(work, (JSON.parse(tarball) as { filename: string }[])[0]!.filename);
    const app = join(work, 'app');
    execFileSync('mkdir', ['-p', app]);
    writeFileSync(join(app, 'package.json'), '{"name":"pack-check","private":true}');
    npm(['install', '--omit=dev', '--ignore-scripts', '--no-package-lock', file], app);
    const cli = join(app, 'node_modules/memplan/dist/cli/memplan.js');
    const out = execFileSync(process.execPath, [cli, 'simulate', join(root, 'examples/mlp-fp16.plan.json'), '--json'], { encoding: 'utf8' });
    const result = JSON.parse(out) as Record<string, unknown>;
    expect(Number(result.peak_allocated_bytes)).toBeGreaterThan(0);
  }, 240_000);
});
