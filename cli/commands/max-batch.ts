/** `memplan max-batch PLAN.json`: the largest micro-batch that fits a GPU, found on the simulator. */
import { DEFAULT_SAFETY_MARGIN, InputError, advise, findMaxBatch, formatSize, stringifyResult, type AdviceResult, type MaxBatchResult } from '../../engine/index.ts';
import { parseByteCount, parseCommandArgs } from '../args.ts';
import { readPlanFile } from '../files.ts';
import { planGpu } from '../gpus.ts';
import { adviceChange, adviceCost, notApplicableText, recommendationText } from '../words.ts';

const usage = `Usage: memplan max-batch PLAN.json [--gpu NAME | --memory-limit-bytes N] [options]

Finds the largest micro-batch (training.batch_size) whose training steps run without CUDA out of memory,
by simulating each trial batch. The cap is --memory-limit-bytes (what set_per_process_memory_fraction would
impose), else the plan's gpu.memory_limit_bytes, else the GPU's memory less the CUDA context.

Options:
  --gpu NAME               a GPU of the catalog (id such as h100-sxm, or the name torch.cuda.get_device_name() prints)
  --memory-limit-bytes N   cap reserved memory at N bytes
  --safety-margin F        fraction of the cap the recommended batch leaves free (default ${DEFAULT_SAFETY_MARGIN})
  --multiple-of K          round the recommended batch down to a multiple of K (e.g. 8), where the batch allows
  --json                   print one JSON object: the max-batch result (engine/result/max-batch.ts) with the
                           advice under "advice"`;

/** What `max-batch --json` prints: the result, with the advice beside it. */
export type MaxBatchOutput = MaxBatchResult & { advice: AdviceResult };

function text(file: string, r: MaxBatchResult, advice: AdviceResult): string {
  const accumulation = r.grad_accumulation_steps;
  const lines = [
    `${r.plan_name || file} on ${r.gpu.name}, cap ${formatSize(r.cap_bytes)}`,
    r.max_batch === 0
      ? 'No batch fits: even batch 1 runs out of memory.'
      : `Largest micro-batch that fits: ${r.max_batch}${accumulation > 1 ? ` (effective batch ${r.effective_batch} with ${accumulation} accumulation steps)` : ''}`,
    recommendationText(r.recommendation, r.cap_bytes),
    r.limited_by
      ? `At its peak (step ${r.limited_by.step}, ${r.limited_by.phase}) memory holds: ${r.limited_by.largest.map((t) => `${t.label} ${formatSize(t.bytes)}`).join(', ')}`
      : '',
    '',
    r.reached_upper_bound ? `The search stopped at its upper bound (${r.max_batch}): larger batches may fit too.` : '',
    ...(advice.advice.length
      ? [
          'To fit a larger effective batch (each change simulated and searched on its own; effective batch = micro-batch x accumulation steps):',
          ...advice.advice.map((a) => `  ${String(a.max_effective_batch ?? 0).padStart(9)}  ${adviceChange(a, 'batch')}: ${adviceCost(a.id, 'batch')}`),
        ]
      : []),
    ...(advice.not_applicable.length ? ['Not advised:', ...advice.not_applicable.map((n) => `  ${notApplicableText(n)}`)] : []),
    '',
    'Trials (batch: peak allocated / peak reserved):',
    ...r.trials.map((t) => `  ${String(t.batch).padStart(7)}: ${t.fits ? 'fits ' : 'OOM  '} ${formatSize(t.peak_allocated_bytes)} / ${formatSize(t.peak_reserved_bytes)}`),
  ];
  return lines.filter((l, i, all) => !(l === '' && all[i - 1] === '')).join('\n') + '\n';
}

async function run(args: string[]): Promise<void> {
  const { values, positionals } = parseCommandArgs('max-batch', args, {
    gpu: { type: 'string' },
    'memory-limit-bytes': { type: 'string' },
    'safety-margin': { type: 'string' },
    'multiple-of': { type: 'string' },
    json: { type: 'boolean', default: false },
  });
  if (positionals.length !== 1) throw new InputError('memplan max-batch', 'expected exactly one plan file');
  const file = positionals[0]!;
  let plan = readPlanFile(file);
  const gpuName = values.gpu as string | undefined;
  const limit = parseByteCount('--memory-limit-bytes', values['memory-limit-bytes'] as string | undefined);
  if (gpuName !== undefined && limit !== undefined) throw new InputError('memplan max-batch', 'give --gpu or --memory-limit-bytes, not both');
  if (gpuName !== undefined) plan = { ...plan, gpu: { name: gpuName } };
  if (limit !== undefined) plan = { ...plan, gpu: { memory_limit_bytes: limit } };
  const device = planGpu(plan);
  const marginText = values['safety-margin'] as string | undefined;
  const safetyMargin = marginText === undefined ? undefined : Number(marginText);
  if (safetyMargin !== undefined && !(safetyMargin >= 0 && safetyMargin < 1)) {
    throw new InputError('--safety-margin', `expected a fraction from 0 to below 1, got "${marginText}"`);
  }
  const multipleText = values['multiple-of'] as string | undefined;
  const multipleOf = multipleText === undefined ? undefined : Number(multipleText);
  if (multipleOf !== undefined && !(Number.isInteger(multipleOf) && multipleOf > 0)) {
    throw new InputError('--multiple-of', `expected a positive whole number, got "${multipleText}"`);
  }
  const r = findMaxBatch(plan, { device, safetyMargin, multipleOf });
  const advice = advise(plan, { device, goal: 'batch', maxBatch: r });
  if (values.json) {
    const output: MaxBatchOutput = { ...r, plan_name: r.plan_name || file, advice };
    process.stdout.write(stringifyResult(output) + '\n');
    return;
  }
  process.stdout.write(text(file, r, advice));
}

export const maxBatchCommand = {
  summary: 'find the largest batch that fits a GPU',
  usage,
  run,
};
