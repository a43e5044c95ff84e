/** `memplan max-batch PLAN.json`: the largest micro-batch that fits a GPU, found on the simulator. */
import { InputError } from '../../engine/errors.ts';
import { formatSize } from '../../engine/allocator/format.ts';
import { DEFAULT_SAFETY_MARGIN, findMaxBatch } from '../../engine/search/max-batch.ts';
import { advise } from '../../engine/search/advice.ts';
import { parseByteCount, parseCommandArgs } from '../args.ts';
import { readPlanFile } from '../files.ts';
import { planGpu } from '../gpus.ts';

const usage = `Usage: memplan max-batch PLAN.json [--gpu NAME | --memory-limit-bytes N] [options]

Finds the largest micro-batch (training.batch_size) whose training steps run without CUDA out of memory,
by simulating each trial batch. The cap is --memory-limit-bytes (what set_per_process_memory_fraction would
impose), else the plan's gpu.memory_limit_bytes, else the GPU's memory less the CUDA context.

Options:
  --gpu NAME               a GPU of the catalog (id such as h100-sxm, or the name torch.cuda.get_device_name() prints)
  --memory-limit-bytes N   cap reserved memory at N bytes
  --safety-margin F        fraction of the cap the recommended batch leaves free (default ${DEFAULT_SAFETY_MARGIN})
  --json                   print one JSON object`;

async function run(args: string[]): Promise<void> {
  const { values, positionals } = parseCommandArgs('max-batch', args, {
    gpu: { type: 'string' },
    'memory-limit-bytes': { type: 'string' },
    'safety-margin': { type: 'string' },
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
  const r = findMaxBatch(plan, { device, safetyMargin });
  const advice = advise({ ...plan, training: { ...plan.training, batch_size: Math.max(1, r.maxBatch) } }, { device, withMaxBatch: true });
  if (values.json) {
    process.stdout.write(
      JSON.stringify({
        plan: plan.name || file,
        gpu: device.name,
        cap_bytes: r.capBytes,
        max_batch: r.maxBatch,
        effective_batch: r.effectiveBatch,
        recommended_batch: r.recommendedBatch,
        safety_margin: r.safetyMargin,
        limited_by: r.limitedBy,
        reached_upper_bound: r.reachedUpperBound,
        advice: advice.map((a) => ({ id: a.id, change: a.change, cost: a.cost, max_batch: a.maxBatch, effective_batch: a.effectiveBatch })),
        trials: r.trials.map((t) => ({
          batch: t.batch,
          fits: t.fits,
          peak_allocated_bytes: t.peakAllocatedBytes,
          peak_reserved_bytes: t.peakReservedBytes,
          oom: t.oom,
        })),
      }) + '\n',
    );
    return;
  }
  const accumulation = plan.training.grad_accumulation_steps;
  const lines = [
    `${plan.name || file} on ${device.name}, cap ${formatSize(r.capBytes)}`,
    r.maxBatch === 0
      ? 'No batch fits: even batch 1 runs out of memory.'
      : `Largest micro-batch that fits: ${r.maxBatch}${accumulation > 1 ? ` (effective batch ${r.effectiveBatch} with ${accumulation} accumulation steps)` : ''}`,
    `Recommended: ${r.recommendedBatch} (keeps ${Math.round(r.safetyMargin * 100)}% of the cap free for what the plan does not describe)`,
    r.limitedBy
      ? `At its peak (step ${r.limitedBy.step}, ${r.limitedBy.phase}) memory holds: ${r.limitedBy.largest.map((t) => `${t.label} ${formatSize(t.bytes)}`).join(', ')}`
      : '',
    '',
    r.reachedUpperBound ? `The search stopped at its upper bound (${r.maxBatch}): larger batches may fit too.` : '',
    'To fit a larger batch (each change simulated on its own; effective batch = micro-batch x accumulation steps):',
    ...[...advice]
      .sort((a, b) => (b.effectiveBatch ?? 0) - (a.effectiveBatch ?? 0))
      .map((a) => `  ${String(a.effectiveBatch ?? 0).padStart(9)}  ${a.change}: ${a.cost}`),
    '',
    'Trials (batch: peak allocated / peak reserved):',
    ...r.trials.map((t) => `  ${String(t.batch).padStart(7)}: ${t.fits ? 'fits ' : 'OOM  '} ${formatSize(t.peakAllocatedBytes)} / ${formatSize(t.peakReservedBytes)}`),
  ];
  process.stdout.write(lines.filter((l, i, all) => !(l === '' && all[i - 1] === '')).join('\n') + '\n');
}

export const maxBatchCommand = {
  summary: 'find the largest batch that fits a GPU',
  usage,
  run,
};
