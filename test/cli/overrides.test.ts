/** Flags that override the plan's fields for one run (issue 13): the same numbers as a plan file with that field. */
import { describe, expect, it } from 'vitest';
import { findMaxBatch, maxBatchResultSchema, simulate, simulateResultSchema } from '../../engine/index.ts';
import { planGpu } from '../../cli/gpus.ts';
import { readPlanWithOverrides } from '../../cli/plan-options.ts';
import { json, memplan, planFile, refused, root } from './support.ts';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const mlp = 'examples/mlp-fp16.plan.json';
const example = JSON.parse(readFileSync(join(root, mlp), 'utf8')) as { training: Record<string, unknown> };

describe('training overrides', () => {
  it('simulate with flags gives what the engine gives for the plan with those fields', () => {
    const flags = ['--batch-size', '64', '--precision', 'amp_bf16', '--optimizer', 'adamw', '--optimizer-impl', 'foreach', '--grad-accum', '2', '--checkpointing', 'non_reentrant'];
    const out = simulateResultSchema.parse(json(['simulate', mlp, ...flags, '--json']));
    const edited = planFile('mlp-edited.plan.json', {
      ...example,
      training: { ...example.training, batch_size: 64, precision: 'amp_bf16', optimizer: 'adamw', optimizer_impl: 'foreach', grad_accumulation_steps: 2, activation_checkpointing: 'non_reentrant' },
    });
    const plan = readPlanWithOverrides(edited, {});
    const direct = simulate(plan, { device: planGpu(plan) });
    expect(out.peak_allocated_bytes).toBe(direct.peak_allocated_bytes);
    expect(out.peak_reserved_bytes).toBe(direct.peak_reserved_bytes);
    // and the override did change the run
    const plain = simulateResultSchema.parse(json(['simulate', mlp, '--json']));
    expect(out.peak_allocated_bytes).not.toBe(plain.peak_allocated_bytes);
  });

  it('--seq-len and --gpu reach a language model; --alloc-conf the allocator', () => {
    const gpt2 = 'examples/gpt2-config-json.plan.json';
    const out = simulateResultSchema.parse(json(['simulate', gpt2, '--seq-len', '256', '--batch-size', '2', '--gpu', 'a100-40gb', '--alloc-conf', 'expandable_segments:True', '--json']));
    const value = JSON.parse(readFileSync(join(root, gpt2), 'utf8')) as { training: object };
    const edited = planFile('gpt2-edited.plan.json', { ...value, training: { ...value.training, seq_len: 256, batch_size: 2 }, allocator: { conf: 'expandable_segments:True' }, gpu: { name: 'a100-40gb' } });
    const plan = readPlanWithOverrides(edited, {});
    const direct = simulate(plan, { device: planGpu(plan) });
    expect(out.gpu.id).toBe('a100-40gb');
    expect(out.peak_reserved_bytes).toBe(direct.peak_reserved_bytes);
    expect(out.peak_allocated_bytes).toBe(direct.peak_allocated_bytes);
  });

  it('max-batch searches the overridden plan', () => {
    const out = maxBatchResultSchema.parse(json(['max-batch', mlp, '--precision', 'fp32', '--grad-accumulation-steps', '3', '--memory-limit', '2GiB', '--json']));
    const base = readPlanWithOverrides(mlp, {});
    const plan = { ...base, training: { ...base.training, precision: 'fp32' as const, grad_accumulation_steps: 3 }, gpu: { memory_limit_bytes: 2 * 2 ** 30 } };
    const direct = findMaxBatch(plan, { device: planGpu({ ...base, gpu: { name: 'h100-sxm' } }) });
    expect(out.max_batch).toBe(direct.max_batch);
    expect(out.grad_accumulation_steps).toBe(3);
    expect(out.effective_batch).toBe(direct.max_batch * 3);
  });

  it('a bad value names the flag and the plan field, is checked as the field is, and exits 2', () => {
    expect(refused(['simulate', mlp, '--batch-size', '0'])).toBe('memplan: --batch-size (training.batch_size): must be a positive integer, got 0');
    expect(refused(['simulate', mlp, '--batch-size', 'eight'])).toBe('memplan: --batch-size: expected a whole number, got "eight"');
    expect(refused(['max-batch', mlp, '--precision', 'amp_bf17'])).toMatch(/^memplan: --precision \(training\.precision\): expected one of .*"amp_bf16".*did you mean "amp_bf16"\?$/);
    expect(refused(['simulate', mlp, '--optimizer', 'lion'])).toMatch(/^memplan: --optimizer \(training\.optimizer\): expected one of "sgd", "sgd_momentum", "adam", "adamw"/);
    expect(refused(['simulate', mlp, '--checkpointing', 'maybe'])).toBe('memplan: --checkpointing: expected none, non_reentrant or reentrant, got "maybe"');
    expect(refused(['simulate', mlp, '--grad-accum', '2', '--grad-accumulation-steps', '3'])).toBe('memplan: --grad-accum: --grad-accumulation-steps already sets training.grad_accumulation_steps; give one of them');
    expect(refused(['simulate', mlp, '--alloc-conf', 'expandable_segment:True'])).toMatch(/^memplan: --alloc-conf \(allocator\.conf\): /);
    expect(refused(['simulate', mlp, '--gpu', 'A100'])).toMatch(/^memplan: --gpu: unknown GPU "A100".*did you mean one of "a100-40gb", "a100-80gb", "a100-80gb-pcie"\?/);
    // several problems at once, one line each
    const both = refused(['simulate', mlp, '--batch-size', '0', '--seq-len', '-1']);
    expect(both.split('\n')).toHaveLength(2);
  });

  it('every override flag is in --help with an example', () => {
    for (const command of ['simulate', 'max-batch']) {
      const help = memplan([command, '--help']).stdout;
      for (const flag of ['--batch-size', '--seq-len', '--precision', '--optimizer', '--checkpointing', '--grad-accumulation-steps', '--gpu', '--alloc-conf', '--memory-limit', '--memory-fraction']) {
        expect(help, `${command} ${flag}`).toMatch(new RegExp(`^  ${flag} .*e\\.g\\. `, 'm'));
      }
    }
  });
});
