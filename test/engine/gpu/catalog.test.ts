/**
 * The GPU catalog (resources/gpus.json) and its lookup. The H100 entry is checked against the device facts
 * measured on the H100 (test/fixtures/device/h100_device_facts.json, made with resources/measure/memplan_measure.py).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { InputError } from '../../../engine/errors.ts';
import { findGpu, memoryAvailableToPyTorch, outsideAllocatorBytes, parseGpuCatalog, type GpuSpec } from '../../../engine/gpu/catalog.ts';
import shipped from '../../../resources/gpus.json' with { type: 'json' };

const MiB = 1_048_576;
const catalog = parseGpuCatalog(shipped);

interface DeviceFacts {
  environment: { device_name: string; total_memory_bytes: number; compute_capability: [number, number] };
  after_init: { total_bytes: number };
  after_first_matmul: { used_outside_allocator_bytes: number; cublas_workspace_bytes: number };
  largest_reservable: { reserved_bytes: number; free_bytes: number };
}
const facts = JSON.parse(
  readFileSync(new URL('../../fixtures/device/h100_device_facts.json', import.meta.url), 'utf8'),
) as DeviceFacts;

/** A copy of the shipped catalog to break on purpose. */
function shippedCopy(): { gpus: Record<string, unknown>[] } & Record<string, unknown> {
  return structuredClone(shipped) as unknown as { gpus: Record<string, unknown>[] } & Record<string, unknown>;
}

function inputError(run: () => unknown): InputError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(InputError);
    return error as InputError;
  }
  throw new Error('expected an InputError');
}

/** PyTorch's default workspace (aten/src/ATen/cuda/CublasHandlePool.cpp, parseChosenWorkspaceSize). */
function defaultBlasWorkspaceBytes(gpu: GpuSpec): number {
  if (gpu.vendor === 'amd') return /^gfx9[45]/.test(gpu.gcn_arch ?? '') ? 128 * MiB : 32 * MiB;
  return [9, 10, 12].includes(gpu.compute_capability[0]) ? 33_554_432 : 4096 * 1024 * 2 + 16 * 1024 * 8;
}

describe('the shipped catalog', () => {
  it('parses', () => {
    expect(catalog.format).toBe('memplan.gpus');
    expect(catalog.version).toBe(1);
    expect(catalog.gpus.length).toBeGreaterThanOrEqual(20);
  });

  it('has unique ids, unique torch names and aliases that point to one GPU only', () => {
    const ids = catalog.gpus.map((gpu) => gpu.id);
    const names = catalog.gpus.map((gpu) => gpu.name.toLowerCase());
    expect(new Set(ids).size).toBe(ids.length);
    expect(new Set(names).size).toBe(names.length);
    const keys = catalog.gpus.flatMap((gpu) => [gpu.id, gpu.name, ...gpu.aliases].map((k) => k.trim().toLowerCase()));
    expect(new Set(keys).size).toBe(keys.length);
  });

  it("gives each GPU PyTorch's default cuBLAS/hipBLAS workspace for its compute capability", () => {
    for (const gpu of catalog.gpus) {
      expect({ id: gpu.id, bytes: gpu.cublas_workspace_bytes }).toEqual({ id: gpu.id, bytes: defaultBlasWorkspaceBytes(gpu) });
    }
  });

  it('says how every figure is known, and leaves PyTorch most of each GPU', () => {
    for (const gpu of catalog.gpus) {
      expect(gpu.total_memory_source.detail.length).toBeGreaterThan(20);
      expect(gpu.non_pytorch_source.detail.length).toBeGreaterThan(20);
      expect(memoryAvailableToPyTorch(gpu)).toBeGreaterThan(0.9 * gpu.total_memory_bytes);
    }
  });
});

for (const [id, file] of [
  ['h100-sxm', 'h100_device_facts.json'],
  ['h200', 'h200_device_facts.json'],
] as const) {
describe(`the ${id} entry equals what was measured on that GPU`, () => {
  const facts = JSON.parse(readFileSync(new URL(`../../fixtures/device/${file}`, import.meta.url), 'utf8')) as DeviceFacts;
  const gpu = findGpu(catalog, facts.environment.device_name);

  it('is found by the device name the measurement recorded', () => {
    expect(gpu.id).toBe(id);
    expect(gpu.name).toBe(facts.environment.device_name);
  });

  it('has the measured total memory, compute capability and cuBLAS workspace', () => {
    expect(gpu.total_memory_bytes).toBe(facts.environment.total_memory_bytes);
    expect(gpu.total_memory_bytes).toBe(facts.after_init.total_bytes);
    expect(gpu.compute_capability).toEqual(facts.environment.compute_capability);
    expect(gpu.cublas_workspace_bytes).toBe(facts.after_first_matmul.cublas_workspace_bytes);
    expect(gpu.total_memory_source.kind).toBe('measured');
  });

  it('has the memory measured outside the allocator after the first cuBLAS call', () => {
    expect(gpu.non_pytorch_bytes).toBe(facts.after_first_matmul.used_outside_allocator_bytes);
    expect(gpu.non_pytorch_source.kind).toBe('measured');
  });

  it('predicts the most the allocator could reserve to within the memory cuDNN and the last free scraps take', () => {
    expect(gpu.largest_reservable_bytes).toBe(facts.largest_reservable.reserved_bytes);
    // the measuring process never ran a backward: the autograd thread's handles were not there
    const available = memoryAvailableToPyTorch(gpu) + gpu.training_threads_bytes;
    expect(available).toBe(facts.environment.total_memory_bytes - facts.after_first_matmul.used_outside_allocator_bytes);
    expect(available).toBeGreaterThanOrEqual(facts.largest_reservable.reserved_bytes);
    expect(available - facts.largest_reservable.reserved_bytes).toBeLessThan(16 * MiB);
  });
});
}

describe('a training process on the H100 (test/fixtures/device/h100_training_outside.json)', () => {
  const training = JSON.parse(readFileSync(new URL('../../fixtures/device/h100_training_outside.json', import.meta.url), 'utf8')) as {
    runs: { name: string; steps: { after_forward: number; after_backward: number; after_optimizer_step: number; after_zero_grad: number }[] }[];
  };
  const gpu = findGpu(catalog, 'h100-sxm');
  it("leaves out what training processes measured on it hold outside the allocator once the autograd thread ran", () => {
    // every run alone on the H100: from step 1's backward on, the outside memory does not move; the catalog keeps
    // the largest (cuDNN runs: ResNet-18, GPT-2, Qwen3), so no answer counts on what a cuBLAS-only step leaves
    const outside = training.runs.map((r) => {
      const later = r.steps.flatMap((s, i) => [...(i > 0 ? [s.after_forward] : []), s.after_backward, s.after_optimizer_step, s.after_zero_grad]);
      expect(new Set(later).size, r.name).toBe(1);
      expect(r.steps[0]!.after_forward, r.name).toBeLessThan(later[0]!);
      return later[0]!;
    });
    expect(outsideAllocatorBytes(gpu)).toBe(Math.max(...outside));
    expect(Math.min(...outside)).toBe(gpu.non_pytorch_bytes + 69_206_016); // the MLP: the autograd thread's cuBLAS handle
    expect(gpu.training_threads_source.kind).toBe('measured');
  });
});

describe('findGpu', () => {
  it('finds a GPU by its id', () => {
    expect(findGpu(catalog, 'a100-80gb').name).toBe('NVIDIA A100-SXM4-80GB');
    expect(findGpu(catalog, 't4').name).toBe('Tesla T4');
  });

  it('finds a GPU by its torch device name in any case, ignoring surrounding whitespace', () => {
    expect(findGpu(catalog, 'NVIDIA GeForce RTX 4090').id).toBe('rtx-4090');
    expect(findGpu(catalog, '  nvidia geforce rtx 4090\n').id).toBe('rtx-4090');
    expect(findGpu(catalog, 'NVIDIA H100 80GB HBM3').id).toBe('h100-sxm');
    expect(findGpu(catalog, 'amd instinct mi300x').id).toBe('mi300x');
  });

  it('finds a GPU by an alias', () => {
    expect(findGpu(catalog, 'H100').id).toBe('h100-sxm');
    expect(findGpu(catalog, 'a100 80gb pcie').id).toBe('a100-80gb-pcie');
    expect(findGpu(catalog, 'A6000').id).toBe('rtx-a6000');
    expect(findGpu(catalog, 'Tesla V100-PCIE-32GB').id).toBe('v100-32gb');
  });

  it('reports an unknown GPU at gpu.name with the known ids and the closest one', () => {
    const error = inputError(() => findGpu(catalog, 'RTX 4900'));
    expect(error.where).toBe('gpu.name');
    expect(error.message).toContain('unknown GPU "RTX 4900"');
    expect(error.message).toContain('known: h100-sxm, ');
    expect(error.message).toContain('did you mean "rtx-4090"?');
    expect(inputError(() => findGpu(catalog, 'h100-sxn')).message).toContain('did you mean "h100-sxm"?');
  });

  it('lists every GPU of a family a name stands for (issue 13: "A100" suggested h100-sxm)', () => {
    expect(inputError(() => findGpu(catalog, 'A100')).message).toContain('did you mean one of "a100-40gb", "a100-80gb", "a100-80gb-pcie"?');
  });

  it('suggests nothing when no GPU is close', () => {
    const error = inputError(() => findGpu(catalog, 'Voodoo5 6000'));
    expect(error.where).toBe('gpu.name');
    expect(error.message).not.toContain('did you mean');
  });
});

describe('parseGpuCatalog', () => {
  it('names the entry and field of a bad value', () => {
    const broken = shippedCopy();
    broken.gpus[3]!.total_memory_bytes = -1;
    const error = inputError(() => parseGpuCatalog(broken));
    expect(error.where).toBe('gpus[3].total_memory_bytes');
    expect(error.message).toContain(`(entry "${String(broken.gpus[3]!.id)}")`);
  });

  it('reports a missing field, an unknown key and a wrong evidence kind', () => {
    const missing = shippedCopy();
    delete missing.gpus[0]!.non_pytorch_bytes;
    expect(inputError(() => parseGpuCatalog(missing)).where).toBe('gpus[0].non_pytorch_bytes');

    const typo = shippedCopy();
    typo.gpus[1]!.total_memory = 1;
    expect(inputError(() => parseGpuCatalog(typo)).message).toContain('unknown key "total_memory"');

    const kind = shippedCopy();
    kind.gpus[2]!.total_memory_source = { kind: 'guessed', detail: 'from a dream' };
    expect(inputError(() => parseGpuCatalog(kind)).where).toBe('gpus[2].total_memory_source.kind');
  });

  it('rejects an alias that another GPU already answers to', () => {
    const clash = shippedCopy();
    (clash.gpus[1]!.aliases as string[]).push('h100');
    const error = inputError(() => parseGpuCatalog(clash));
    expect(error.where).toMatch(/^gpus\[1\]\.aliases\[\d+\]$/);
    expect(error.message).toContain('already used by gpus[0] ("h100-sxm")');
  });

  it('rejects more memory outside PyTorch than the GPU has', () => {
    const impossible = shippedCopy();
    impossible.gpus[0]!.non_pytorch_bytes = impossible.gpus[0]!.total_memory_bytes;
    expect(inputError(() => parseGpuCatalog(impossible)).where).toBe('gpus[0].non_pytorch_bytes');
  });

  it('rejects a file of another format', () => {
    expect(inputError(() => parseGpuCatalog({ format: 'memplan.plan', version: 1 })).where).toBe('format');
    expect(inputError(() => parseGpuCatalog(null)).where).toBe('gpus.json');
  });
});
