/** Field types shared by the result schemas. Bytes are whole numbers (JavaScript doubles hold them exactly to 8 PiB). */
import { z } from 'zod';
import { RESULT_SCHEMA_VERSION } from './version.ts';

export const bytes = z.number().int().nonnegative();
/** A difference of bytes (negative: more memory). */
export const signedBytes = z.number().int();
export const count = z.number().int().nonnegative();
export const positiveCount = z.number().int().positive();
export const schemaVersion = z.literal(RESULT_SCHEMA_VERSION);

/** Phases of the training step, in the order they run (a timeline's `phases` list is a subset, in first-seen order). */
export const PHASES = ['load', 'forward', 'backward', 'optimizer', 'zero_grad'] as const;

/** What a live tensor holds, for the breakdown at the peak (engine/tensor/tensor.ts `MemoryCategory`). */
export const memoryCategorySchema = z.enum(['parameter', 'gradient', 'optimizer_state', 'activation', 'temporary', 'workspace', 'input']);

export const liveTensorSchema = z.object({
  label: z.string(),
  bytes,
  category: memoryCategorySchema,
});

/** PyTorch's OutOfMemoryError, where it was raised. */
export const oomSchema = z.object({
  message: z.string(),
  step: count,
  phase: z.string(),
});

/** A problem with the user's input, at a field path such as `training.batch_size` or `model.layers[2].out_features`. */
export const issueSchema = z.object({
  path: z.string(),
  message: z.string(),
});

export type LiveTensor = z.output<typeof liveTensorSchema>;
export type Oom = z.output<typeof oomSchema>;
export type Issue = z.output<typeof issueSchema>;
