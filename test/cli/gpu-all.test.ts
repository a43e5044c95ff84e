/** `max-batch --gpu all`: the largest batch on every GPU of the catalog, one table, one JSON object (issue 13). */
import { describe, expect, it } from 'vitest';
import { findMaxBatch, maxBatchResultSchema } from '../../engine/index.ts';
import { gpuCatalog, gpuDevice } from '../../cli/gpus.ts';
import { readPlanWithOverrides } from '../../cli/plan-options.ts';
import { maxBatchAllGpusSchema } from '../../cli/commands/max-batch-all.ts';
import { json, memplan, planFile, refused } from './support.ts';

const mlp = 'examples/mlp-fp16.plan.json';

describe('max-batch --gpu all', () => {
  it('--json: one object, a result for every catalog GPU, largest first, each what the engine finds on that GPU', () => {
    const out = maxBatchAllGpusSchema.parse(json(['max-batch', mlp, '--gpu', 'all', '--batch-size', '1', '--json']));
    const catalog = gpuCatalog().gpus;
    expect(out.results.map((r) => r.gpu.id).sort()).toEqual(catalog.map((g) => g.id).sort());
    const batches = out.results.map((r) => r.max_batch);
    expect(batches).toEqual([...batches].sort((a, b) => b - a));
    const plan = readPlanWithOverrides(mlp, {});
    for (const id of ['h100-sxm', 't4', 'mi300x']) {
      const gpu = catalog.find((g) => g.id === id)!;
      const onGpu = { ...plan, gpu: { name: id } };
      const direct = findMaxBatch(onGpu, { device: gpuDevice(onGpu, gpu) });
      const row = maxBatchResultSchema.parse(out.results.find((r) => r.gpu.id === id));
      expect(row.max_batch, id).toBe(direct.max_batch);
      expect(row.recommendation.batch, id).toBe(direct.recommendation.batch);
    }
  });

  it('the table ranks every GPU by its largest batch; --memory-fraction caps each GPU', () => {
    const r = memplan(['max-batch', mlp, '--gpu', 'all', '--memory-fraction', '0.5']);
    expect(r.code, r.stderr).toBe(0);
    const rows = r.stdout.split('\n').filter((l) => /^[a-z0-9-]+\s+\d/.test(l));
    expect(rows).toHaveLength(gpuCatalog().gpus.length);
    const largest = rows.map((l) => Number(l.split(/\s+/)[3]));
    expect(largest).toEqual([...largest].sort((a, b) => b - a));
    const out = maxBatchAllGpusSchema.parse(json(['max-batch', mlp, '--gpu', 'all', '--memory-fraction', '0.5', '--json']));
    for (const row of out.results) {
      const result = maxBatchResultSchema.parse(row);
      const gpu = gpuCatalog().gpus.find((g) => g.id === result.gpu.id)!;
      expect(result.cap_bytes).toBe(Math.floor(0.5 * gpu.total_memory_bytes));
    }
  });

  it('says where nothing fits', () => {
    const r = memplan(['max-batch', 'examples/llama-3-8b-bf16.plan.json', '--gpu', 'all', '--optimizer', 'adam']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^Nothing fits on .*t4.*: even a batch of 1 runs out of memory\.$/m);
  });

  it('a plan the engine refuses on every GPU: exit 2, naming the file and the field (as --gpu ID does)', () => {
    // fp32 attention past a sliding window: refused on every GPU (not measured)
    const window = planFile('window-fp32.plan.json', {
      format: 'memplan.plan',
      version: 1,
      model: { hf_config: { model_type: 'mistral', hidden_size: 256, intermediate_size: 512, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 1000, sliding_window: 256 } },
      training: { batch_size: 1, seq_len: 256, precision: 'fp32', optimizer: 'sgd' },
    });
    expect(refused(['max-batch', window, '--gpu', 'all', '--memory-fraction', '0.01'])).toMatch(/^memplan: \S*window-fp32\.plan\.json: training\.seq_len: reaches the sliding window: .* in float32 is not simulated yet/);
  });

  it('refuses a byte cap (it describes one GPU) and --gpu all on simulate', () => {
    expect(refused(['max-batch', mlp, '--gpu', 'all', '--memory-limit', '8GiB'])).toMatch(/^memplan: --memory-limit: a byte cap describes one GPU/);
    expect(refused(['simulate', mlp, '--gpu', 'all'])).toMatch(/^memplan: --gpu: "all" is for max-batch/);
  });
});
