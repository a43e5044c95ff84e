/** `memplan max-batch PLAN.json`: the largest micro-batch that fits a GPU, found on the simulator. */
import { DEFAULT_SAFETY_MARGIN, InputError, fitsBySearch, formatSize, setUpAdvice, stringifyResult, type AdviceNotComputed, type AdviceResult, type MaxBatchResult } from '../../engine/index.ts';
import { EngineWorkers } from '../engine-workers.ts';
import { parseCommandArgs, parsePositiveInteger } from '../args.ts';
import { caveatsText } from '../caveats.ts';
import { PLAN_OPTIONS, gpuChoice, namedForPlanFile, placePlan, planOptionsHelp, readPlanWithOverrides } from '../plan-options.ts';
import { maxBatchOnEveryGpu } from './max-batch-all.ts';
import { adviceChange, adviceCost, joinLines, neededText, notApplicableText, recommendationText, unstableRegionText } from '../words.ts';
import { gpuCatalog } from '../gpus.ts';

const usage = `Usage: memplan max-batch PLAN.json [options]

Finds the largest micro-batch (training.batch_size) whose training steps run without CUDA out of memory,
by simulating each trial batch. The cap is --memory-limit or --memory-fraction (what
set_per_process_memory_fraction would impose), else the plan's gpu.memory_limit_bytes, else the GPU's memory
less the CUDA context and library handles. The flags below override the plan's fields (the file is not changed),
e.g.
  memplan max-batch examples/gpt2-config-json.plan.json --seq-len 2048 --precision amp_bf16 --gpu all

Options:
${planOptionsHelp(true)}
  --safety-margin F        fraction of the cap the recommended batch leaves free (default ${DEFAULT_SAFETY_MARGIN})
  --multiple-of K          round the recommended batch down to a multiple of K (e.g. 8), where the batch allows
  --json                   print one JSON object: the max-batch result (engine/result/max-batch.ts) with the
                           advice, when computed, under "advice" (else why not, under "advice_not_computed") and
                           what it assumes under "caveats"; with --gpu all, one object with a result for every
                           GPU, largest batch first
  --threads N              worker threads for a long search and for --gpu all (default: one fewer than the
                           cores, at most 4, none below 4 cores; 1: none): they simulate ahead the trials the
                           search will likely need and search the advice's changes side by side; same answers
  --advice, --no-advice    what to change for a larger batch, each change searched on its own (together longer
                           than the search itself). Default: computed when the plan's own batch does not fit,
                           not otherwise; never with --gpu all`;

/** What `max-batch --json` prints: the result (its caveats included), with the advice beside it or why it is not. */
export type MaxBatchOutput = MaxBatchResult & ({ advice: AdviceResult } | { advice_not_computed: AdviceNotComputed });

/** The answer: the largest batch, the recommendation and what limits it, printed as soon as the search ends. */
function answerLines(file: string, r: MaxBatchResult): string[] {
  const accumulation = r.grad_accumulation_steps;
  return [
    `${r.plan_name || file} on ${r.gpu.name}, cap ${formatSize(r.cap_bytes)}`,
    r.max_batch === 0
      ? `No batch fits: even batch 1 runs out of memory.${r.needed ? ` ${neededText(r.needed, formatSize)}` : ''}`
      : `Largest micro-batch that fits: ${r.max_batch}${accumulation > 1 ? ` (effective batch ${r.effective_batch} with ${accumulation} accumulation steps)` : ''}`,
    recommendationText(r.recommendation, r.cap_bytes),
    r.unstable_region ? unstableRegionText(r.unstable_region) : '',
    r.limited_by
      ? `At its peak (step ${r.limited_by.step}, ${r.limited_by.phase}) memory holds: ${r.limited_by.largest.map((t) => `${t.label} ${formatSize(t.bytes)}`).join(', ')}`
      : '',
    '',
    r.reached_upper_bound ? `The search stopped at its upper bound (${r.max_batch}): larger batches may fit too.` : '',
  ];
}

/** The rest, once the advice is searched: what to change, the trials, and what the answer assumes. */
function restLines(r: MaxBatchResult, advice: AdviceResult | null, changes: number): string[] {
  return [
    ...(!advice && changes > 0 ? [`To fit a larger batch: run with --advice to search the ${changes} changes memplan knows for this plan`] : []),
    ...(advice?.advice.length
      ? [
          'To fit a larger effective batch (each change simulated and searched on its own; effective batch = micro-batch x accumulation steps):',
          ...advice.advice.map((a) => `  ${String(a.max_effective_batch ?? 0).padStart(9)}  ${adviceChange(a, 'batch')}: ${adviceCost(a, 'batch')}`),
        ]
      : []),
    ...(advice?.not_applicable.length ? ['Not advised:', ...advice.not_applicable.map((n) => `  ${notApplicableText(n)}`)] : []),
    '',
    'Trials (batch: peak allocated / peak reserved):',
    ...r.trials.map((t) => `  ${String(t.batch).padStart(7)}: ${t.fits ? 'fits ' : 'OOM  '} ${formatSize(t.peak_allocated_bytes)} / ${formatSize(t.peak_reserved_bytes)}`),
    '',
    ...(r.caveats ? caveatsText(r.caveats) : []),
  ];
}

async function run(args: string[]): Promise<void> {
  const { values, positionals } = parseCommandArgs('max-batch', args, {
    ...PLAN_OPTIONS,
    'safety-margin': { type: 'string' },
    'multiple-of': { type: 'string' },
    json: { type: 'boolean', default: false },
    advice: { type: 'boolean' },
    threads: { type: 'string' },
  });
  if (positionals.length !== 1) throw new InputError('memplan max-batch', 'expected exactly one plan file');
  const file = positionals[0]!;
  const marginText = values['safety-margin'] as string | undefined;
  const safetyMargin = marginText === undefined ? undefined : Number(marginText);
  if (safetyMargin !== undefined && !(marginText!.trim() !== '' && safetyMargin >= 0 && safetyMargin < 1)) {
    throw new InputError('--safety-margin', `expected a fraction from 0 to below 1, got "${marginText}"`);
  }
  const multipleOf = parsePositiveInteger('--multiple-of', values['multiple-of'] as string | undefined);
  const threads = parsePositiveInteger('--threads', values.threads as string | undefined);
  const choice = gpuChoice(values);
  if (choice.gpu?.trim().toLowerCase() === 'all') {
    if (values.advice === true) throw new InputError('--advice', 'not with --gpu all (a search per change and GPU); ask for the advice with one --gpu');
    process.stdout.write(await maxBatchOnEveryGpu(file, values, choice, { safetyMargin, multipleOf, threads, json: values.json === true }));
    return;
  }
  const { plan, device } = placePlan(readPlanWithOverrides(file, values, choice.gpu), choice);
  const workers = new EngineWorkers(threads);
  let r: MaxBatchResult;
  let advice: AdviceResult | null = null;
  let answer: string[];
  try {
    r = await workers.maxBatch(plan, { device, safetyMargin, multipleOf, catalog: gpuCatalog().gpus.map((g) => ({ ...g, conv_workspaces: device.conv_workspaces })) }).catch((error: unknown) => {
      throw namedForPlanFile(error, file, values, choice.gpu);
    });
    // The answer first; the advice (a search per change) follows when it is ready. By default only when the
    // plan's own batch does not fit: it costs more than the search did (issue #15; README, "Advice"), and "what to
    // change" is that plan's question.
    answer = answerLines(file, r);
    if (!values.json) process.stdout.write(joinLines(answer, undefined));
    if (values.advice ?? !fitsBySearch(r, plan.training.batch_size)) advice = await workers.advise(plan, { device, goal: 'batch', maxBatch: r });
  } finally {
    await workers.close();
  }
  // what --advice would search: the same setup advise makes (LoRA too, for a plan whose batch does not fit)
  const changes = advice ? 0 : setUpAdvice(plan, { device, goal: 'batch', maxBatch: r }).variants.length;
  if (values.json) {
    const notComputed: AdviceNotComputed = { reason: values.advice === false ? 'no_advice' : 'plan_fits', changes };
    const output: MaxBatchOutput = { ...r, plan_name: r.plan_name || file, ...(advice ? { advice } : { advice_not_computed: notComputed }) };
    process.stdout.write(stringifyResult(output) + '\n');
    return;
  }
  process.stdout.write(joinLines(restLines(r, advice, values.advice === false ? 0 : changes), answer.at(-1)));
}

export const maxBatchCommand = {
  summary: 'find the largest batch that fits a GPU',
  usage,
  run,
};
