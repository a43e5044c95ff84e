/** What `memplan gpus --json` and `memplan presets --json` print (and what a GPU or model picker lists). */
import { z } from 'zod';
import { bytes, schemaVersion } from './common.ts';

export const gpuListSchema = z.object({
  schema_version: schemaVersion,
  kind: z.literal('gpus'),
  /** The GPU a plan that names none is simulated on. */
  default_gpu: z.string(),
  gpus: z.array(
    z.object({
      id: z.string(),
      name: z.string(),
      aliases: z.array(z.string()),
      vendor: z.enum(['nvidia', 'amd']),
      total_memory_bytes: bytes,
      available_to_pytorch_bytes: bytes,
      /** How total_memory_bytes is known: measured on that GPU, derived, or unconfirmed. */
      total_memory_source: z.enum(['measured', 'derived', 'unconfirmed']),
      /** How the memory outside the allocator (the CUDA context, kernels, library handles) is known, the same way. */
      non_pytorch_source: z.enum(['measured', 'derived', 'unconfirmed']),
    }),
  ),
});

export const presetListSchema = z.object({
  schema_version: schemaVersion,
  kind: z.literal('presets'),
  presets: z.array(
    z.object({
      id: z.string(),
      family: z.string(),
      /** As the model card says it, e.g. "8.0B". */
      parameters: z.string(),
      source: z.string(),
    }),
  ),
});

export type GpuList = z.output<typeof gpuListSchema>;
export type PresetList = z.output<typeof presetListSchema>;
