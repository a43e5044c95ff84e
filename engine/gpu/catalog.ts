/**
 * The GPU catalog (`memplan.gpus`, version 1): which GPU a plan names, how much memory CUDA reports for it, and how
 * much of that PyTorch's caching allocator can actually use. The data lives in resources/gpus.json (its `about`
 * explains every field and where each figure comes from); the engine cannot read files, so the edges import that
 * JSON and pass it to `parseGpuCatalog` once, then look GPUs up with `findGpu`.
 */
import { z } from 'zod';
import { InputError, describeSchemaIssue, editDistance, fieldPath } from '../errors.ts';

const positiveInt = z.number().int('must be a whole number').positive('must be a positive integer');
const nonEmpty = z.string().trim().min(1, 'must not be empty');

/** How a figure is known: read on that GPU model, computed from a less exact report, or an unchecked estimate. */
export const evidenceSchema = z.strictObject({
  kind: z.enum(['measured', 'derived', 'unconfirmed']),
  detail: nonEmpty,
});

export const gpuSpecSchema = z
  .strictObject({
    id: z.string().regex(/^[a-z0-9][a-z0-9-]*$/, 'must be lower-case letters, digits and "-"'),
    /** Exactly what `torch.cuda.get_device_name()` prints. */
    name: nonEmpty,
    aliases: z.array(nonEmpty),
    vendor: z.enum(['nvidia', 'amd']),
    memory_type: nonEmpty,
    /** As `torch.cuda.get_device_capability()` reports it (on ROCm: the HIP arch, gfx942 -> [9, 4]). */
    compute_capability: z.tuple([z.number().int().nonnegative(), z.number().int().nonnegative()]),
    /** The ROCm arch (`gcnArchName` without features), AMD only: it decides the hipBLAS workspace size. */
    gcn_arch: z.string().regex(/^gfx[0-9a-f]+$/, 'must look like "gfx942"').optional(),
    /** `torch.cuda.get_device_properties(0).total_memory` (cudaDeviceProp.totalGlobalMem). */
    total_memory_bytes: positiveInt,
    total_memory_source: evidenceSchema,
    /** Memory the process holds outside the caching allocator: CUDA context, loaded kernels, library handles. */
    non_pytorch_bytes: z.number().int('must be a whole number').nonnegative('must be zero or more'),
    non_pytorch_source: evidenceSchema,
    /**
     * What a training process adds outside the allocator at its first backward: the autograd thread's cuBLAS and
     * cuDNN handles (measured on the H100: test/fixtures/device/h100_training_outside.json; Note [Library handles]).
     */
    training_threads_bytes: z.number().int('must be a whole number').nonnegative('must be zero or more'),
    training_threads_source: evidenceSchema,
    /** The most the allocator could reserve on an idle GPU; only where measured. */
    largest_reservable_bytes: positiveInt.optional(),
    /** PyTorch's default cuBLAS/hipBLAS workspace per (thread, stream), allocated through the caching allocator. */
    cublas_workspace_bytes: positiveInt,
    /** `multiProcessorCount` (SMs; compute units on AMD): CUDA reductions size their launch, and their workspace, by it. */
    multi_processor_count: positiveInt,
    /** `maxThreadsPerMultiProcessor` (from the vendor's occupancy tables: 2048 on sm70/80/90/100, 1536 on sm86/89/120, 1024 on sm75). */
    max_threads_per_multi_processor: positiveInt,
    notes: z.string(),
  })
  .superRefine((gpu, ctx) => {
    if (gpu.non_pytorch_bytes >= gpu.total_memory_bytes) {
      ctx.addIssue({ code: 'custom', path: ['non_pytorch_bytes'], message: 'must be less than total_memory_bytes' });
    } else if (gpu.non_pytorch_bytes + gpu.training_threads_bytes >= gpu.total_memory_bytes) {
      ctx.addIssue({ code: 'custom', path: ['training_threads_bytes'], message: 'with non_pytorch_bytes, must be less than total_memory_bytes' });
    }
    if (gpu.largest_reservable_bytes !== undefined && gpu.largest_reservable_bytes > gpu.total_memory_bytes) {
      ctx.addIssue({ code: 'custom', path: ['largest_reservable_bytes'], message: 'must not exceed total_memory_bytes' });
    }
    if (gpu.vendor === 'amd' && gpu.gcn_arch === undefined) {
      ctx.addIssue({ code: 'custom', path: ['gcn_arch'], message: 'is required for an AMD GPU (e.g. "gfx942")' });
    }
    if (gpu.vendor === 'nvidia' && gpu.gcn_arch !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['gcn_arch'], message: 'is for AMD GPUs only' });
    }
  });

export const gpuCatalogSchema = z.strictObject({
  format: z.literal('memplan.gpus'),
  version: z.literal(1),
  about: z.string(),
  gpus: z.array(gpuSpecSchema).min(1, 'must list at least one GPU'),
});

export type Evidence = z.infer<typeof evidenceSchema>;
export type GpuSpec = z.infer<typeof gpuSpecSchema>;
export type GpuCatalog = z.infer<typeof gpuCatalogSchema>;

/** How ids, names and aliases are compared: case-insensitive, surrounding and repeated whitespace ignored. */
function lookupKey(text: string): string {
  return text.trim().replace(/\s+/g, ' ').toLowerCase();
}


/** The entry an issue is about, by its id where it has a readable one: `(entry "h100-sxm")`. */
function entryLabel(value: unknown, path: readonly PropertyKey[]): string {
  if (path[0] !== 'gpus' || typeof path[1] !== 'number' || typeof value !== 'object' || value === null) return '';
  const gpus = (value as { gpus?: unknown }).gpus;
  const entry = Array.isArray(gpus) ? (gpus[path[1]] as unknown) : undefined;
  const id = typeof entry === 'object' && entry !== null ? (entry as { id?: unknown }).id : undefined;
  return typeof id === 'string' && id ? ` (entry "${id}")` : '';
}

/**
 * Validates a catalog (the parsed resources/gpus.json). Every problem is an InputError naming the entry and field,
 * e.g. `gpus[3].total_memory_bytes: must be a positive integer (entry "a100-80gb")`. Also checks that ids, names
 * and aliases are unique once compared the way `findGpu` compares them, so every lookup has one answer.
 */
export function parseGpuCatalog(value: unknown): GpuCatalog {
  const result = gpuCatalogSchema.safeParse(value);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    throw new InputError(fieldPath(issue.path) || 'gpus.json', describeSchemaIssue(issue) + entryLabel(value, issue.path));
  }
  const catalog = result.data;
  const owners = new Map<string, { id: string; index: number }>();
  catalog.gpus.forEach((gpu, index) => {
    const keys: [string, string][] = [
      ['id', gpu.id],
      ['name', gpu.name],
      ...gpu.aliases.map((alias, i): [string, string] => [`aliases[${i}]`, alias]),
    ];
    for (const [field, text] of keys) {
      const key = lookupKey(text);
      const owner = owners.get(key);
      if (owner !== undefined) {
        const problem =
          owner.index === index
            ? `"${text}" repeats this entry's id, name or another alias`
            : `"${text}" is already used by gpus[${owner.index}] ("${owner.id}")`;
        throw new InputError(`gpus[${index}].${field}`, `${problem} (entry "${gpu.id}")`);
      }
      owners.set(key, { id: gpu.id, index });
    }
  });
  return catalog;
}

/**
 * The catalog entry whose id, torch device name or alias matches `nameOrId` (case-insensitive, surrounding
 * whitespace ignored). Unknown names are an InputError at `gpu.name` that lists the known ids and, when one is
 * within a few edits of the input, suggests it.
 */
export function findGpu(catalog: GpuCatalog, nameOrId: string): GpuSpec {
  const wanted = lookupKey(nameOrId);
  for (const gpu of catalog.gpus) {
    if (lookupKey(gpu.id) === wanted || lookupKey(gpu.name) === wanted || gpu.aliases.some((a) => lookupKey(a) === wanted)) {
      return gpu;
    }
  }
  let closest: { id: string; distance: number } | undefined;
  for (const gpu of catalog.gpus) {
    for (const candidate of [gpu.id, gpu.name, ...gpu.aliases]) {
      const distance = editDistance(wanted, lookupKey(candidate));
      if (closest === undefined || distance < closest.distance) closest = { id: gpu.id, distance };
    }
  }
  // A family name ("A100") names every GPU whose id, name or alias contains it: list them all.
  const family = wanted.length >= 2 ? catalog.gpus.filter((gpu) => [gpu.id, gpu.name, ...gpu.aliases].some((c) => lookupKey(c).includes(wanted))) : [];
  // "Close" = at most a third of the input's characters changed (and at least 1, so short typos still match).
  const suggestion =
    family.length > 1
      ? `; did you mean one of ${family.map((gpu) => `"${gpu.id}"`).join(', ')}?`
      : family.length === 1
        ? `; did you mean "${family[0]!.id}"?`
        : closest !== undefined && wanted.length > 0 && closest.distance <= Math.max(1, Math.floor(wanted.length / 3))
          ? `; did you mean "${closest.id}"?`
          : '';
  const known = catalog.gpus.map((gpu) => gpu.id).join(', ');
  throw new InputError('gpu.name', `unknown GPU "${nameOrId.trim()}"; known: ${known}${suggestion}`);
}

/**
 * What a training process holds outside the caching allocator once its first backward has run: the CUDA context,
 * loaded kernels and the main thread's cuBLAS handle (`non_pytorch_bytes`), and the autograd thread's cuBLAS and
 * cuDNN handles (`training_threads_bytes`). nvidia-smi shows this plus the reserved memory.
 */
export function outsideAllocatorBytes(gpu: Pick<GpuSpec, 'non_pytorch_bytes' | 'training_threads_bytes'>): number {
  return gpu.non_pytorch_bytes + gpu.training_threads_bytes;
}

/** What the caching allocator of a training run can take on the whole GPU. */
export function memoryAvailableToPyTorch(gpu: Pick<GpuSpec, 'total_memory_bytes' | 'non_pytorch_bytes' | 'training_threads_bytes'>): number {
  return gpu.total_memory_bytes - outsideAllocatorBytes(gpu);
}

/**
 * Whether the GPU computes in bf16: NVIDIA from compute capability 8.0 (Ampere). On a V100 or T4 PyTorch emulates
 * bf16 (slower, and attention on the math kernel): the caveat `bf16_emulated`, and advice does not suggest it.
 */
export function hasBf16Arithmetic(gpu: { vendor?: GpuSpec['vendor']; compute_capability?: readonly [number, number] }): boolean {
  return !(gpu.vendor === 'nvidia' && gpu.compute_capability !== undefined && gpu.compute_capability[0] < 8);
}
