/**
 * Every `--json` prints the engine's result objects (engine/result/): each output parses with its schema, and
 * what the CLI adds beside a result (the advice) parses with its own. Also the issue-13 contradictions, in the CLI.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { adviceNotComputedSchema, adviceResultSchema, gpuListSchema, maxBatchResultSchema, presetListSchema, simulateResultSchema } from '../../engine/index.ts';

const root = new URL('../../', import.meta.url).pathname;
function memplan(...args: string[]) {
  const r = spawnSync(process.execPath, [join(root, 'cli/memplan.ts'), ...args], { encoding: 'utf8', cwd: root });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}
const scratch = mkdtempSync(join(tmpdir(), 'memplan-json-'));
/** A plan file in the scratch folder. */
function planFile(name: string, plan: object): string {
  const path = join(scratch, name);
  writeFileSync(path, JSON.stringify(plan));
  return path;
}
const json = (...args: string[]) => {
  const r = memplan(...args);
  expect(r.code, r.stderr).toBe(0);
  expect(r.stdout.trim().split('\n')).toHaveLength(1); // one JSON object
  return JSON.parse(r.stdout) as Record<string, unknown>;
};

describe('--json prints the result schema', () => {
  it('simulate: a simulate result (timeline columns as plain arrays, snake_case steps) with its advice', () => {
    const out = json('simulate', 'examples/mlp-fp16.plan.json', '--json', '--advice');
    const result = simulateResultSchema.parse(out);
    expect(result.timeline.allocated_max).toBeInstanceOf(Float64Array);
    expect(Math.max(...result.timeline.allocated_max)).toBe(result.peak_allocated_bytes);
    expect(Object.keys((out.steps as object[])[0]!)).toContain('peak_allocated_bytes');
    expect(JSON.stringify(out)).not.toMatch(/"[a-z]+[A-Z][A-Za-z]*":/); // no camelCase key anywhere
    adviceResultSchema.parse(out.advice);
  });

  it('simulate --json --summary includes the memory summary', () => {
    const out = simulateResultSchema.parse(json('simulate', 'examples/mlp-fp16.plan.json', '--json', '--summary'));
    expect(out.memory_summary).toContain('PyTorch CUDA memory summary');
  });

  it('max-batch: a max-batch result with its advice', () => {
    const out = json('max-batch', 'examples/mlp-fp16.plan.json', '--memory-limit-bytes', String(2 ** 31), '--json', '--advice');
    const result = maxBatchResultSchema.parse(out);
    expect(result.trials.map((t) => t.index)).toEqual(result.trials.map((_, i) => i + 1));
    adviceResultSchema.parse(out.advice);
    expect(JSON.stringify(out)).not.toMatch(/"[a-z]+[A-Z][A-Za-z]*":/);
  });

  it('gpus and presets: one JSON object each', () => {
    expect(gpuListSchema.parse(json('gpus', '--json')).default_gpu).toBe('h100-sxm');
    expect(presetListSchema.parse(json('presets', '--json')).presets.length).toBeGreaterThan(10);
  });
});

describe('what the CLI says does not contradict itself (issue 13)', () => {
  it('max-batch: the accumulation advice agrees with the largest batch beside it', () => {
    for (const [file, extra] of [
      ['examples/mlp-fp16.plan.json', ['--memory-limit-bytes', '8589934592']],
      ['examples/resnet50-amp.plan.json', []],
    ] as const) {
      const out = json('max-batch', file, ...extra, '--json', '--advice');
      const result = maxBatchResultSchema.parse(out);
      const advice = adviceResultSchema.parse(out.advice);
      const accumulation = advice.advice.find((a) => a.id === 'accumulation');
      expect(accumulation, file).toBeDefined();
      if (accumulation?.id !== 'accumulation') continue;
      expect(accumulation.micro_batch).toBeLessThanOrEqual(result.max_batch);
      expect(accumulation.effective_batch).toBe(accumulation.micro_batch * accumulation.steps);
      expect(accumulation.effective_batch).toBeGreaterThan(result.effective_batch);
      const text = memplan('max-batch', file, ...extra, '--advice').stdout;
      expect(text).toContain('To fit a larger effective batch');
      expect(text).not.toContain('the same effective batch');
    }
  });

  it('simulate lists no change that saves nothing or costs memory, and no heading over an empty list', () => {
    const text = memplan('simulate', 'examples/llama-3-8b-bf16.plan.json', '--advice').stdout;
    expect(text).not.toMatch(/^\s+\+/m); // "+358.00 MiB micro-batch 1 ..."
    expect(text).not.toMatch(/^\s+-?0 bytes/m);
    const out = json('simulate', 'examples/llama-3-8b-bf16.plan.json', '--json', '--advice');
    for (const a of adviceResultSchema.parse(out.advice).advice) expect(a.saved_bytes).toBeGreaterThan(0);
    if (adviceResultSchema.parse(out.advice).advice.length === 0) expect(text).not.toContain('What changes would save');
  });

  it('max-batch never recommends 0 when a batch fits (GPT-2 XL on an A100 40 GB)', () => {
    const path = planFile('gpt2-xl.plan.json', { format: 'memplan.plan', version: 1, model: { preset: 'gpt2-xl' }, training: { batch_size: 1, seq_len: 1024, precision: 'amp_bf16', optimizer: 'adamw' }, gpu: { name: 'a100-40gb' } });
    const result = maxBatchResultSchema.parse(json('max-batch', path, '--json'));
    expect(result.max_batch).toBeGreaterThan(0);
    expect(result.recommendation.batch).toBeGreaterThan(0);
    expect(result.recommendation.batch).toBeLessThanOrEqual(result.max_batch);
    expect(memplan('max-batch', path).stdout).not.toContain('Recommended: 0');
  });

  it('an OOM reports the model, not the state at the failure (Llama-3-70B on an H100)', () => {
    const path = planFile('llama-70b.plan.json', { format: 'memplan.plan', version: 1, model: { preset: 'llama-3-70b' }, training: { batch_size: 1, seq_len: 1024, precision: 'bf16' } });
    const out = simulateResultSchema.parse(json('simulate', path, '--json'));
    expect(out.fits).toBe(false);
    expect(out.model.parameter_count).toBeGreaterThan(70e9);
    expect(memplan('simulate', path).stdout).toMatch(/70,\d{3},\d{3},\d{3} parameters/);
  });

  it('an OOM in step 1 reports the step peaks reached, not 0 bytes (Llama-3-8B on an RTX 4090)', () => {
    const example = JSON.parse(readFileSync(join(root, 'examples/llama-3-8b-bf16.plan.json'), 'utf8')) as object;
    const path = planFile('llama-8b-4090.plan.json', { ...example, gpu: { name: 'rtx-4090' } });
    const out = simulateResultSchema.parse(json('simulate', path, '--json'));
    expect(out.fits).toBe(false);
    const failing = out.steps.at(-1)!;
    expect(failing.incomplete).toBe(true);
    expect(failing.peak_allocated_bytes).toBeGreaterThan(0);
    expect(memplan('simulate', path).stdout).not.toContain('0 bytes / 0 bytes');
  });
});

/** The changes an advice simulated (or searched): those it advises, and those it found to save nothing or cost more. */
function simulatedChanges(advice: unknown): number {
  const a = adviceResultSchema.parse(advice);
  return a.advice.length + a.not_applicable.filter((n) => ['saves_nothing', 'uses_more_memory', 'no_larger_batch', 'not_simulated'].includes(n.reason_id)).length;
}

describe('advice: by default only for a plan that does not fit (issue #15)', () => {
  it('simulate: a plan that fits gets the same result without it, and the flag that asks for it', () => {
    const { advice_not_computed: notComputed, ...byDefault } = json('simulate', 'examples/mlp-fp16.plan.json', '--json');
    expect(byDefault).not.toHaveProperty('advice');
    // --json says why there is no advice, and what --advice would do (the text's count)
    expect(adviceNotComputedSchema.parse(notComputed)).toEqual({ reason: 'plan_fits', changes: 3 });
    const { advice_not_computed: notAsked, ...withoutAdvice } = json('simulate', 'examples/mlp-fp16.plan.json', '--json', '--no-advice');
    expect(notAsked).toEqual({ reason: 'no_advice', changes: 3 });
    expect(withoutAdvice).toEqual(byDefault);
    const { advice, ...rest } = json('simulate', 'examples/mlp-fp16.plan.json', '--json', '--advice');
    expect(adviceResultSchema.parse(advice).advice.length).toBeGreaterThan(0);
    expect(rest).not.toHaveProperty('advice_not_computed');
    expect(rest).toEqual(byDefault);
    const text = memplan('simulate', 'examples/mlp-fp16.plan.json');
    expect(text.code).toBe(0);
    expect(text.stdout).toContain('max_memory_reserved()');
    expect(text.stdout).toMatch(/^What to change: run with --advice to simulate the 3 changes memplan knows for this plan$/m);
    expect(text.stdout).not.toMatch(/What changes would save|Not advised|No change memplan knows/);
    expect(memplan('simulate', 'examples/mlp-fp16.plan.json', '--no-advice').stdout).not.toMatch(/What to change|What changes would save|Not advised/);
  });

  it('simulate: a plan that runs out of memory gets it unasked', () => {
    const path = planFile('gpt2-xl-16.plan.json', { format: 'memplan.plan', version: 1, model: { preset: 'gpt2-xl' }, training: { batch_size: 16, seq_len: 1024, precision: 'amp_bf16' }, gpu: { name: 'h100-sxm' } });
    const out = json('simulate', path, '--json');
    expect(out.fits).toBe(false);
    expect(adviceResultSchema.parse(out.advice).advice.some((a) => a.id === 'checkpointing')).toBe(true);
    // compared with what the plan needs with no cap (Note [Advice for a plan that does not fit])
    expect(adviceResultSchema.parse(out.advice).base_peak_reserved_bytes).toBe(out.needed_bytes);
    expect(out).not.toHaveProperty('advice_not_computed');
    expect(memplan('simulate', path).stdout).toContain('What changes would save');
    const notAsked = json('simulate', path, '--json', '--no-advice');
    expect(notAsked).not.toHaveProperty('advice');
    expect(adviceNotComputedSchema.parse(notAsked.advice_not_computed).reason).toBe('no_advice');
  });

  it('max-batch: a plan whose batch fits gets the same search without it; one whose batch does not, with it', () => {
    const { advice_not_computed: notComputed, ...byDefault } = json('max-batch', 'examples/mlp-fp16.plan.json', '--memory-limit', '1GiB', '--json');
    expect(byDefault).not.toHaveProperty('advice');
    const { changes } = adviceNotComputedSchema.parse(notComputed);
    expect(notComputed).toEqual({ reason: 'plan_fits', changes });
    expect(maxBatchResultSchema.parse(byDefault).max_batch).toBeGreaterThanOrEqual(JSON.parse(readFileSync(join(root, 'examples/mlp-fp16.plan.json'), 'utf8')).training.batch_size);
    const { advice, ...rest } = json('max-batch', 'examples/mlp-fp16.plan.json', '--memory-limit', '1GiB', '--json', '--advice');
    expect(changes).toBe(simulatedChanges(advice));
    expect(changes).toBeGreaterThan(0);
    expect(adviceResultSchema.parse(advice).goal).toBe('batch');
    expect(rest).toEqual(byDefault);
    const text = memplan('max-batch', 'examples/mlp-fp16.plan.json', '--memory-limit', '1GiB').stdout;
    expect(text).toMatch(new RegExp(`^To fit a larger batch: run with --advice to search the ${changes} changes memplan knows for this plan$`, 'm'));
    expect(text).not.toMatch(/To fit a larger effective batch|Not advised/);
    expect(memplan('max-batch', 'examples/mlp-fp16.plan.json', '--memory-limit', '1GiB', '--no-advice').stdout).not.toMatch(/To fit a larger|Not advised/);
    // The plan asks for more than fits: what to change is its question.
    const tooLarge = json('max-batch', 'examples/mlp-fp16.plan.json', '--memory-limit', '1GiB', '--batch-size', String(maxBatchResultSchema.parse(byDefault).max_batch + 1), '--json');
    expect(adviceResultSchema.parse(tooLarge.advice).goal).toBe('batch');
    // Below the answer, a batch that runs out where fit is not monotonic (the search tried it): advised too.
    const search = maxBatchResultSchema.parse(byDefault);
    const failing = search.trials.find((t) => !t.fits && t.batch < search.max_batch); // 3584 below 4096
    expect(failing).toBeDefined();
    expect(json('max-batch', 'examples/mlp-fp16.plan.json', '--memory-limit', '1GiB', '--batch-size', String(failing!.batch), '--json')).toHaveProperty('advice');
  });

  it('the changes it counts are the ones --advice simulates, LoRA included for a full fine-tune that does not fit', () => {
    const tinyllama = join(root, 'resources/measure/scenarios/heldout/heldout_tinyllama_4l_fp32_adam_forloop_seq256_cap10g.json');
    for (const command of ['simulate', 'max-batch']) {
      const { advice } = json(command, tinyllama, '--batch-size', '40', '--json');
      expect(adviceResultSchema.parse(advice).not_applicable.find((n) => n.id === 'lora')?.reason_id ?? 'advised').not.toBe('plan_fits');
      const notAsked = adviceNotComputedSchema.parse(json(command, tinyllama, '--batch-size', '40', '--json', '--no-advice').advice_not_computed);
      expect(notAsked.reason).toBe('no_advice');
      expect(notAsked.changes, command).toBe(simulatedChanges(advice));
    }
  });

  it('max-batch --gpu all computes no advice, and says so when asked for it', () => {
    const r = memplan('max-batch', 'examples/mlp-fp16.plan.json', '--gpu', 'all', '--advice');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--advice: not with --gpu all/);
  });
});

describe('--threads', () => {
  it('max-batch gives the same result on one thread and on several', () => {
    const one = json('max-batch', 'examples/gpt2-config-json.plan.json', '--memory-limit', '6GiB', '--json', '--threads', '1');
    const three = json('max-batch', 'examples/gpt2-config-json.plan.json', '--memory-limit', '6GiB', '--json', '--threads', '3');
    expect(three).toEqual(one);
  });
  it('refuses a count that is not a positive integer, naming the flag', () => {
    const r = memplan('max-batch', 'examples/mlp-fp16.plan.json', '--threads', '0');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--threads');
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});
