/**
 * Generated and mutated plan files through the memplan command: in process (the simulate command's `run`, its
 * output captured), each ends in JSON of the result schema with finite numbers or an InputError (exit 2); and a
 * bounded number of real processes, for the exit codes and that no stack trace reaches the terminal. Each test
 * prints how many inputs it tried.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { InputError, simulateResultSchema } from '../../engine/index.ts';
import { simulateCommand } from '../../cli/commands/simulate.ts';
import { Outcomes, expectFinite, mutate, mutation, plan } from './inputs.ts';

const SEED = Number(process.env.FUZZ_SEED ?? 12);
const scratch = mkdtempSync(join(tmpdir(), 'memplan-fuzz-'));
const root = new URL('../../', import.meta.url).pathname;
let n = 0;

function planFile(value: unknown): string {
  const file = join(scratch, `plan-${n++}.json`);
  writeFileSync(file, JSON.stringify(value));
  return file;
}

/** `memplan simulate FILE --json` in this process: the exit code it would give, and its output. */
async function simulateInProcess(file: string): Promise<{ code: number; stdout: string }> {
  let stdout = '';
  const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    stdout += String(chunk);
    return true;
  });
  try {
    await simulateCommand.run([file, '--json']);
    return { code: 0, stdout };
  } catch (error) {
    if (error instanceof InputError) return { code: 2, stdout: error.message };
    throw error; // cli/memplan.ts would exit 1: "internal error"
  } finally {
    spy.mockRestore();
  }
}

describe('fuzz: the memplan command', () => {
  it('generated and mutated plan files: JSON of the schema, or exit 2 with the field named', async () => {
    const outcomes = new Outcomes();
    const t0 = performance.now();
    const input = fc.tuple(plan, fc.array(mutation, { maxLength: 2 })).map(([p, ms]) => mutate(p, ms));
    await fc.assert(
      fc.asyncProperty(input, async (value) => {
        const s = performance.now();
        const r = await simulateInProcess(planFile(value));
        if (r.code === 0) {
          const output = JSON.parse(r.stdout) as Record<string, unknown>;
          expectFinite(output);
          expect(simulateResultSchema.safeParse(output).success).toBe(true);
        } else expect(r.stdout).toMatch(/^\S+: /);
        outcomes.add(r.code === 0 ? 'exit 0' : 'exit 2', performance.now() - s);
      }),
      { numRuns: 200, seed: SEED },
    );
    console.log(`memplan simulate in process: ${outcomes} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  });

  it('as processes: exit 2 with one line a problem and no stack trace, or exit 0', async () => {
    const run = promisify(execFile);
    const inputs = fc.sample(fc.tuple(plan, fc.array(mutation, { minLength: 1, maxLength: 2 })).map(([p, ms]) => mutate(p, ms)), { numRuns: 8, seed: SEED });
    // the cases of issue 12, and text that is not JSON
    const seen = [
      { format: 'memplan.plan', version: 1, model: { preset: 'gpt2' }, training: { batch_size: 4, grad_accumulation_steps: 1_000_000_000 } },
      { format: 'memplan.plan', version: 1, model: { hf_config: { model_type: 'gpt2', n_layer: 10_000_000 } }, training: { batch_size: 4 } },
      { format: 'memplan.plan', version: 1, model: { preset: 'gpt2' }, training: { batch_size: 4 }, gpu: { memory_limit_bytes: 80 } },
    ];
    const files = [...seen, ...inputs].map(planFile);
    const notJson = join(scratch, 'not-json.json');
    writeFileSync(notJson, '{"format": "memplan.plan", ');
    files.push(notJson);
    const t0 = performance.now();
    const results = await Promise.all(
      files.map((file) =>
        run(process.execPath, [join(root, 'cli/memplan.ts'), 'simulate', file], { timeout: 30_000 }).then(
          () => ({ code: 0, stderr: '' }),
          (error: { code?: number; stderr?: string }) => ({ code: error.code ?? -1, stderr: error.stderr ?? '' }),
        ),
      ),
    );
    for (const [i, r] of results.entries()) {
      expect([0, 2], `${files[i]}: ${r.stderr}`).toContain(r.code);
      expect(r.stderr).not.toMatch(/\bat .*\.ts:\d+/);
      for (const line of r.stderr.trim().split('\n').filter(Boolean)) expect(line).toMatch(/^memplan: /);
    }
    expect(results.slice(0, 3).map((r) => r.code)).toEqual([2, 2, 2]);
    expect(results[0]!.stderr).toContain('too large to simulate');
    expect(results[2]!.stderr).toContain('did you mean 80 GB');
    console.log(`memplan simulate as processes: ${files.length} plan files, exits ${results.map((r) => r.code).join(' ')}, in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  });
});
