/**
 * `memplan max-batch PLAN.json --gpu all`: the largest batch on every GPU of the catalog, largest first: which
 * GPU to rent for a plan, and which ones it does not fit at all. Each GPU is searched as `--gpu ID` would search
 * it (the same plan, overrides and cap flags), without the advice (one search per change and GPU).
 */
import { InputError, RESULT_SCHEMA_VERSION, caveatsSchema, formatSize, maxBatchResultSchema, stringifyResult, type MaxBatchResult } from '../../engine/index.ts';
import { EngineWorkers } from '../engine-workers.ts';
import { gpuCatalog } from '../gpus.ts';
import { namedForPlanFile, placePlan, readPlanWithOverrides, type GpuChoice } from '../plan-options.ts';
import { z } from 'zod';

/** What `max-batch --gpu all --json` prints: one object, a max-batch result per GPU with its caveats. */
export const maxBatchAllGpusSchema = z.object({
  schema_version: z.literal(RESULT_SCHEMA_VERSION),
  kind: z.literal('max_batch_all_gpus'),
  plan_name: z.string(),
  /** Every catalog GPU the plan is simulated on, the largest batch first (ties: the larger cap first). */
  results: z.array(maxBatchResultSchema.extend({ caveats: caveatsSchema })),
  /** The catalog GPUs the plan is not simulated on (e.g. sliding-window attention past the window off the H100), and why. */
  not_simulated: z.array(z.object({ gpu: z.string(), field: z.string(), message: z.string() })),
});

/** A GPU the engine refused the plan on: the field and what it said. */
type Refused = z.output<typeof maxBatchAllGpusSchema>['not_simulated'][number];

type Row = MaxBatchResult;

function table(file: string, rows: Row[], refused: Refused[]): string {
  const name = rows[0]?.plan_name || file;
  const lines = [
    `${name}: the largest micro-batch on every GPU of the catalog (memplan gpus), largest first`,
    '',
    `${'gpu'.padEnd(16)} ${'cap'.padStart(10)} ${'largest'.padStart(8)} ${'recommended'.padStart(11)} ${'peak reserved'.padStart(14)}  confidence`,
    ...rows.map((r) => {
      const atMax = r.trials.find((t) => t.batch === r.max_batch && t.fits);
      return (
        `${(r.gpu.id || r.gpu.name).padEnd(16)} ${formatSize(r.cap_bytes).padStart(10)} ${(r.max_batch ? String(r.max_batch) : 'none').padStart(8)} ` +
        `${(r.max_batch ? String(r.recommendation.batch) : '-').padStart(11)} ${(atMax ? formatSize(atMax.peak_reserved_bytes) : '-').padStart(14)}  ${r.caveats?.confidence ?? '-'}`
      );
    }),
  ];
  // one line per reason: GPUs refused for the same reason together
  const reasons = new Map<string, string[]>();
  for (const r of refused) reasons.set(`${r.field}: ${r.message}`, [...(reasons.get(`${r.field}: ${r.message}`) ?? []), r.gpu]);
  if (reasons.size) lines.push('', ...[...reasons].map(([reason, gpus]) => `Not simulated on ${gpus.join(', ')}: ${reason}`));
  const none = rows.filter((r) => r.max_batch === 0);
  if (none.length) lines.push('', `Nothing fits on ${none.map((r) => r.gpu.id).join(', ')}: even a batch of 1 runs out of memory.`);
  if (rows.some((r) => r.reached_upper_bound)) lines.push('', 'A search that reached its upper bound may fit larger batches still.');
  lines.push(
    '',
    'Confidence: high on the H100 SXM (where memplan was calibrated); elsewhere the library workspaces are the H100\'s',
    'and the catalog says which memory figures were measured (memplan gpus). `memplan max-batch PLAN --gpu ID` shows one',
    'GPU with its trials, what fills memory and what to change.',
  );
  return lines.join('\n') + '\n';
}

export async function maxBatchOnEveryGpu(
  file: string,
  values: Record<string, string | boolean | (string | boolean)[] | undefined>,
  choice: GpuChoice,
  options: { safetyMargin: number | undefined; multipleOf: number | undefined; threads: number | undefined; json: boolean },
): Promise<string> {
  if (choice.limitBytes !== undefined) {
    throw new InputError(choice.limitFlag!, 'a byte cap describes one GPU; with --gpu all, cap each GPU with --memory-fraction F instead');
  }
  const base = readPlanWithOverrides(file, values);
  const searches = gpuCatalog().gpus.map((gpu) => {
    const { plan, device } = placePlan({ ...base, gpu: { name: gpu.id } }, { ...choice, gpu: gpu.id });
    return { plan, options: { device, safetyMargin: options.safetyMargin, multipleOf: options.multipleOf } };
  });
  // one search per GPU on each core (cli/engine-workers.ts)
  const workers = new EngineWorkers(options.threads);
  let results: (MaxBatchResult | InputError)[];
  try {
    results = await workers.maxBatchEach(searches);
  } finally {
    await workers.close();
  }
  const refused: Refused[] = [];
  const rows: Row[] = [];
  results.forEach((r, i) => {
    if (r instanceof InputError) refused.push({ gpu: searches[i]!.options.device.id ?? searches[i]!.options.device.name, field: r.where, message: r.problem });
    else rows.push({ ...r, plan_name: r.plan_name || file });
  });
  // refused everywhere: the plan's own problem, said as a single search says it
  const first = results.find((r) => r instanceof InputError);
  if (rows.length === 0 && first) throw namedForPlanFile(first, file, values);
  rows.sort((a, b) => b.max_batch - a.max_batch || b.cap_bytes - a.cap_bytes);
  if (!options.json) return table(file, rows, refused);
  return stringifyResult({ schema_version: RESULT_SCHEMA_VERSION, kind: 'max_batch_all_gpus', plan_name: rows[0]?.plan_name ?? file, results: rows, not_simulated: refused }) + '\n';
}
