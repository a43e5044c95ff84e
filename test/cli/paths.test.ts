/** Paths are the user's: resolved from the folder they ran the command in, named in every message (issue 13). */
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { simulateResultSchema } from '../../engine/index.ts';
import { json, memplan, refused, root, scratch } from './support.ts';

describe('paths', () => {
  it('npm run memplan resolves a relative path from the folder npm was started in (INIT_CWD), not the repository root', () => {
    const here = join(scratch, 'user-folder');
    mkdirSync(join(here, 'sub'), { recursive: true });
    writeFileSync(join(here, 'mine.plan.json'), JSON.stringify({ format: 'memplan.plan', version: 1, model: { layers: [{ type: 'linear', in_features: 8, out_features: 4 }], input_features: 8 }, training: { batch_size: 3 } }));
    // as `cd user-folder/sub && npm run memplan -- simulate ../mine.plan.json` runs it: in the root, INIT_CWD set
    const env = { npm_lifecycle_event: 'memplan', INIT_CWD: join(here, 'sub') };
    const out = simulateResultSchema.parse(json(['simulate', '../mine.plan.json', '--json'], { cwd: root, env }));
    expect(out.model.parameter_count).toBe(8 * 4 + 4);
    // a missing file names what was typed and the path tried
    expect(refused(['simulate', '../nope.json'], { cwd: root, env })).toBe(`memplan: ../nope.json (${join(here, 'nope.json')}): no such file`);
    // INIT_CWD of another npm script (a test run, say) is not ours: the process's folder counts
    expect(refused(['simulate', 'mine.plan.json'], { cwd: root, env: { npm_lifecycle_event: 'test', INIT_CWD: here } })).toBe(`memplan: mine.plan.json (${join(root, 'mine.plan.json')}): no such file`);
    expect(json(['simulate', 'mine.plan.json', '--json'], { cwd: here }).kind).toBe('simulate');
  });

  it('the real `npm run memplan -- simulate FILE` from a subfolder finds the file there', () => {
    const env: Record<string, string | undefined> = { ...process.env, npm_config_update_notifier: 'false' };
    delete env['npm_lifecycle_event'];
    delete env['INIT_CWD'];
    const npmCli = process.env['npm_execpath'];
    const args = ['run', '-s', 'memplan', '--', 'simulate', 'mlp-fp16.plan.json', '--batch-size', '4', '--json'];
    const r = npmCli?.endsWith('.js')
      ? spawnSync(process.execPath, [npmCli, ...args], { cwd: join(root, 'examples'), env, encoding: 'utf8' })
      : spawnSync('npm', args, { cwd: join(root, 'examples'), env, encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    const out = simulateResultSchema.parse(JSON.parse(r.stdout));
    expect(out.plan_name).toContain('residual MLP');
    expect(memplan(['simulate', 'mlp-fp16.plan.json']).code).toBe(2); // the same path from the root is not there
  });

  it('a problem in the plan names the file and the field; bad JSON names the file', () => {
    const bad = join(scratch, 'typo.plan.json');
    writeFileSync(bad, JSON.stringify({ format: 'memplan.plan', version: 1, model: { preset: 'gpt2' }, training: { batchsize: 8 } }));
    const lines = refused(['simulate', bad]).split('\n');
    expect(lines).toContain(`memplan: ${bad}: training.batchsize: unknown key "batchsize"; did you mean "batch_size"?`);
    writeFileSync(bad, '{ "format": ');
    expect(refused(['max-batch', bad])).toMatch(new RegExp(`^memplan: ${bad.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: not valid JSON`));
    expect(refused(['replay', 'missing.pickle'])).toBe(`memplan: missing.pickle (${join(root, 'missing.pickle')}): no such file`);
  });
});
