/**
 * What the main process asks the engine about what it stores: whether a plan is complete and valid (the engine's
 * `safeParsePlan`, GPU names checked against the shipped catalog), and whether a result is one the engine returns
 * (its result schemas, by kind, at RESULT_SCHEMA_VERSION). Results are written as JSON with the engine's replacer
 * (typed arrays as plain arrays: engine Note [Timeline JSON]).
 */
import catalogJson from '../../../resources/gpus.json' with { type: 'json' };
import {
  maxBatchResultSchema,
  parseGpuCatalog,
  replayResultSchema,
  RESULT_SCHEMA_VERSION,
  resultJsonReplacer,
  safeParsePlan,
  simulateResultSchema,
  type GpuCatalog,
} from '../../../engine/index.ts';
import { describeIssues, type ResultJson } from '../../common/ipc.ts';

/** The result kinds a plan row can hold, each with the engine's schema for it. */
const RESULT_SCHEMAS = { simulate: simulateResultSchema, max_batch: maxBatchResultSchema, replay: replayResultSchema } as const;
export const STORED_RESULT_KINDS = Object.keys(RESULT_SCHEMAS) as (keyof typeof RESULT_SCHEMAS)[];

let catalog: GpuCatalog | undefined;

export function isCompletePlan(plan: unknown): boolean {
  catalog ??= parseGpuCatalog(catalogJson);
  return safeParsePlan(plan, { catalog }).ok;
}

/**
 * Null when `result` is an engine result of a stored kind at the current schema version, else what is wrong,
 * each problem with its field (`result.peak_reserved_bytes: ...`).
 */
export function resultProblem(result: ResultJson): string | null {
  if (!Object.hasOwn(RESULT_SCHEMAS, result.kind)) return `result.kind: must be one of ${STORED_RESULT_KINDS.join(', ')}`;
  if (result.schema_version !== RESULT_SCHEMA_VERSION) return `result.schema_version: is ${result.schema_version}; this memplan reads and writes ${RESULT_SCHEMA_VERSION}`;
  const parsed = RESULT_SCHEMAS[result.kind as keyof typeof RESULT_SCHEMAS].safeParse(result);
  return parsed.success ? null : describeIssues(parsed.error, ['result']);
}

export { resultJsonReplacer, RESULT_SCHEMA_VERSION };
