/**
 * The engine worker's protocol (docs/app.md): what the renderer asks and what the worker answers, as discriminated
 * unions on `kind`. Every message carries the request's `id` (a number the renderer increments); the renderer drops
 * answers whose id is not the latest of its kind. The worker validates each request with `engineRequestSchema`
 * (messages cross a trust boundary of sorts: a bug in the renderer should read as an answer, not a crash).
 * Everything here is structured-cloneable: plain objects, arrays, typed arrays, ArrayBuffers.
 */
import { z } from 'zod';
import { adviceItemSchema, adviceResultSchema } from '../result/advice.ts';
import { issueSchema } from '../result/common.ts';
import { maxBatchResultSchema, trialSchema } from '../result/max-batch.ts';
import { replayResultSchema } from '../result/replay.ts';
import { simulateResultSchema } from '../result/simulate.ts';

const requestId = z.number().int().nonnegative();

export const engineRequestSchema = z.discriminatedUnion('kind', [
  /** `plan` is the plan file's JSON as the user has it (not yet validated). */
  z.object({ kind: z.literal('simulate'), id: requestId, plan: z.unknown() }),
  /** Searches the largest batch for the plan's GPU; streams trials. */
  z.object({
    kind: z.literal('max_batch'),
    id: requestId,
    plan: z.unknown(),
    /** Fraction of the cap the recommendation keeps free (default 0.05). */
    safety_margin: z.number().min(0).lt(1).optional(),
    /** Round the recommendation down to a multiple of this (default 1). */
    multiple_of: z.number().int().positive().optional(),
  }),
  /** What to change, variant by variant. `goal`: `memory` (default) or `batch` (a larger effective batch; searches). */
  z.object({ kind: z.literal('advice'), id: requestId, plan: z.unknown(), goal: z.enum(['memory', 'batch']).optional() }),
  /** A PyTorch memory snapshot (pickle, gzipped or not, or its JSON). */
  z.object({
    kind: z.literal('replay'),
    id: requestId,
    bytes: z.union([z.instanceof(ArrayBuffer), z.instanceof(Uint8Array)]),
    memory_limit_bytes: z.number().int().positive().optional(),
    /** Replay under this PYTORCH_CUDA_ALLOC_CONF instead of the snapshot's settings. */
    alloc_conf: z.string().optional(),
    /** Settings to replay the program under as well (default: a few common ones). */
    what_if: z.array(z.string()).optional(),
    /** Send `bytes` back with the result (the sender transferred them and wants to keep them: to attach them to a plan). */
    return_bytes: z.boolean().optional(),
  }),
  /** Stop the request with that id (it answers `cancelled` at its next pause). */
  z.object({ kind: z.literal('cancel'), id: requestId }),
]);

export const engineAnswerSchema = z.discriminatedUnion('kind', [
  /** Every problem of the plan, each with its field path. */
  z.object({ kind: z.literal('invalid_plan'), id: requestId, issues: z.array(issueSchema) }),
  /**
   * An input error that is not a field of the plan (a corrupt snapshot, say); `where` says where in the input.
   * `internal`: a bug in memplan, not the user's input.
   */
  z.object({ kind: z.literal('error'), id: requestId, message: z.string(), where: z.string().optional(), internal: z.boolean().optional() }),
  z.object({ kind: z.literal('simulate_result'), id: requestId, result: simulateResultSchema }),
  z.object({ kind: z.literal('trial'), id: requestId, trial: trialSchema }),
  z.object({ kind: z.literal('max_batch_result'), id: requestId, result: maxBatchResultSchema }),
  z.object({ kind: z.literal('advice_item'), id: requestId, advice: adviceItemSchema }),
  /** After the last item: the whole advice ranked best first, with why the other changes are not advised. */
  z.object({ kind: z.literal('advice_done'), id: requestId, result: adviceResultSchema }),
  /** How far a long request is; a replay says which stage it is in. */
  z.object({ kind: z.literal('progress'), id: requestId, fraction: z.number().min(0).max(1), stage: z.enum(['decompress', 'parse', 'trace', 'replay', 'segments', 'what_if']).optional() }),
  /** `bytes`: the snapshot as sent, when the request asked for it back (`return_bytes`). */
  z.object({ kind: z.literal('replay_result'), id: requestId, result: replayResultSchema, bytes: z.union([z.instanceof(ArrayBuffer), z.instanceof(Uint8Array)]).optional() }),
  z.object({ kind: z.literal('cancelled'), id: requestId }),
]);

export type EngineRequest = z.input<typeof engineRequestSchema>;
export type EngineAnswer = z.output<typeof engineAnswerSchema>;
export type EngineRequestKind = EngineRequest['kind'];
export type EngineAnswerKind = EngineAnswer['kind'];
/** The answer of one kind, e.g. `AnswerOf<'trial'>`. */
export type AnswerOf<K extends EngineAnswerKind> = Extract<EngineAnswer, { kind: K }>;
export type RequestOf<K extends EngineRequestKind> = Extract<EngineRequest, { kind: K }>;
