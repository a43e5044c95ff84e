/** `memplan simulate PLAN.json`: the predicted memory of a training run, as PyTorch's allocator would report it. */
import { InputError, UNBOUNDED_MEMORY_BYTES, advise, formatSize, partlyTrainable, setUpAdvice, simulate, stringifyResult, type AdviceNotComputed, type AdviceResult, type SimulateResult } from '../../engine/index.ts';
import { parseCommandArgs } from '../args.ts';
import { caveatsText } from '../caveats.ts';
import { PLAN_OPTIONS, gpuChoice, namedForPlanFile, placePlan, planOptionsHelp, readPlanWithOverrides } from '../plan-options.ts';
import { adviceChange, adviceCost, groupDigits, joinLines, notApplicableText, noteText } from '../words.ts';

const usage = `Usage: memplan simulate PLAN.json [options]

Simulates the plan's training steps (docs/plan-format.md) through PyTorch's tensors, autograd and CUDA caching
allocator, and prints what torch.cuda.max_memory_allocated() and max_memory_reserved() would report.
The flags below override the plan's fields for this run (the file is not changed), e.g.
  memplan simulate examples/llama-3-8b-bf16.plan.json --batch-size 2 --seq-len 4096 --gpu h200

Options:
${planOptionsHelp(false)}
  --json                   print one JSON object: the simulate result (engine/result/simulate.ts, memory_summary
                           included) with the advice, when computed, under "advice" (else why not, under
                           "advice_not_computed") and what it assumes under "caveats"
  --advice, --no-advice    what to change, each change simulated on its own (together about as long as the
                           simulate itself). Default: computed when the plan runs out of memory, not otherwise
  --summary                also print torch.cuda.memory_summary() as it would read at the end`;

/** What `simulate --json` prints: the result (its caveats included), with the advice beside it or why it is not. */
export type SimulateOutput = SimulateResult & ({ advice: AdviceResult } | { advice_not_computed: AdviceNotComputed });

/** Where in the run: a step and its phase, or the loading of the model before any step (step 0). */
function where(at: { step: number; phase: string }): string {
  return at.phase === 'load' ? 'while loading the model (model.to("cuda"))' : `in step ${at.step} (${at.phase})`;
}

/**
 * What trains, where not everything does (LoRA, frozen parameters): the count and `trainable%` as PEFT's
 * print_trainable_parameters() prints them (four decimals).
 */
function trainableText(model: SimulateResult['model']): string {
  const t = partlyTrainable(model);
  if (t === null) return '';
  return `, ${groupDigits(t)} trainable (trainable%: ${((100 * t) / model.parameter_count).toFixed(4)}),`;
}

/** The answer: what the plan needs and where, printed as soon as it is simulated. */
function answerLines(file: string, r: SimulateResult): string[] {
  const b = r.breakdown_at_peak;
  return [
    `${r.plan_name || file}: ${groupDigits(r.model.parameter_count)} parameters (${formatSize(r.model.parameter_bytes)})${trainableText(r.model)} on ${r.gpu.name}`,
    r.oom ? `OUT OF MEMORY ${where(r.oom)}: ${r.oom.message}` : `Fits: ${formatSize(r.headroom_bytes)} of the ${formatSize(r.gpu.cap_bytes)} cap left free at the peak`,
    ...(r.oom && r.needed_bytes !== null ? [`Needs ${formatSize(r.needed_bytes)} reserved at this batch with no cap (simulated on this GPU with unbounded memory)`] : []),
    `max_memory_allocated()  ${formatSize(r.peak_allocated_bytes)}   (${r.peak_at.phase === 'load' ? 'while loading the model' : `step ${r.peak_at.step}, ${r.peak_at.phase}`})`,
    `max_memory_reserved()   ${formatSize(r.peak_reserved_bytes)}`,
    `nvidia-smi (approx.)    ${formatSize(r.nvidia_smi_bytes)}`,
    '',
    'At the peak:',
    ...Object.entries(b)
      .filter(([, v]) => v > 0)
      .map(([k, v]) => `  ${k.replace('_', ' ').padEnd(18)} ${formatSize(v)}`),
    '',
    'Largest tensors at the peak:',
    ...r.largest_at_peak.slice(0, 8).map((t) => `  ${formatSize(t.bytes).padStart(12)}  ${t.label}`),
    '',
    // (none when loading the model ran out of memory, before any step)
    ...(r.steps.length
      ? [
          'Per step (peak allocated / reserved):',
          ...r.steps.map((s) => `  step ${s.step}: ${formatSize(s.peak_allocated_bytes)} / ${formatSize(s.peak_reserved_bytes)}${s.incomplete ? ' (stopped by the out-of-memory error)' : ''}`),
          '',
        ]
      : []),
  ];
}

/** The rest, once the advice is simulated: what to change (or how to ask), and what the answer assumes. */
function restLines(r: SimulateResult, advice: AdviceResult | null, changes: number): string[] {
  return [
    ...(!advice
      ? changes > 0
        ? [`What to change: run with --advice to simulate the ${changes} changes memplan knows for this plan`]
        : []
      : advice.advice.length
        ? [
            // Note [Advice for a plan that does not fit]: a plan that runs out is measured by what it needs with no cap
            r.fits ? 'What changes would save (peak reserved, each simulated on its own):' : 'What changes would save (each simulated on its own; the peak reserved of those that fit, what those that still run out need with no cap, against what this plan needs):',
            ...advice.advice.map((a) => `  -${formatSize(a.saved_bytes)}`.padEnd(14) + `${adviceChange(a)}${a.fits ? '' : ` (still out of memory: needs ${formatSize(a.peak_reserved_bytes)} with no cap)`}; ${adviceCost(a)}`),
          ]
        : ['No change memplan knows lowers the peak reserved memory of this plan.']),
    ...(advice?.not_applicable.length ? ['Not advised:', ...advice.not_applicable.map((n) => `  ${notApplicableText(n)}`)] : []),
    '',
    ...(r.caveats ? caveatsText(r.caveats) : []),
    // the caveats say how the model is loaded
    ...r.notes.filter((n) => n.id !== 'parameters_loaded_in_training_dtype').map((n) => `Note: ${noteText(n)}`),
  ];
}

async function run(args: string[]): Promise<void> {
  const { values, positionals } = parseCommandArgs('simulate', args, {
    ...PLAN_OPTIONS,
    json: { type: 'boolean', default: false },
    summary: { type: 'boolean', default: false },
    advice: { type: 'boolean' },
  });
  if (positionals.length !== 1) throw new InputError('memplan simulate', 'expected exactly one plan file');
  const file = positionals[0]!;
  const choice = gpuChoice(values);
  if (choice.gpu?.trim().toLowerCase() === 'all') throw new InputError('--gpu', '"all" is for max-batch (the largest batch on every GPU of the catalog); simulate takes one GPU');
  const { plan, device } = placePlan(readPlanWithOverrides(file, values, choice.gpu), choice);
  let r: SimulateResult;
  try {
    r = simulate(plan, { device });
  } catch (error) {
    throw namedForPlanFile(error, file, values, choice.gpu);
  }
  // The answer first; the advice (a simulation per change) follows when it is ready. By default only for a plan
  // that runs out of memory: it costs about what the answer did (issue #15; README, "Advice"), and "what to change"
  // is that plan's question.
  const answer = answerLines(file, r);
  if (!values.json) process.stdout.write(joinLines(answer, ''));
  // A plan that does not fit is compared by what it needs with no cap (Note [Advice for a plan that does not fit]).
  const base = { device, basePeakReservedBytes: r.fits ? r.peak_reserved_bytes : (r.needed_bytes ?? UNBOUNDED_MEMORY_BYTES), baseFits: r.fits };
  const advice = (values.advice ?? !r.fits) ? advise(plan, base) : null;
  // what --advice would simulate: the same setup advise makes (LoRA too, for a plan that does not fit)
  const changes = advice ? 0 : setUpAdvice(plan, base).variants.length;
  if (values.json) {
    const notComputed: AdviceNotComputed = { reason: values.advice === false ? 'no_advice' : 'plan_fits', changes };
    const output: SimulateOutput = { ...r, plan_name: r.plan_name || file, ...(advice ? { advice } : { advice_not_computed: notComputed }) };
    process.stdout.write(stringifyResult(output) + '\n');
    return;
  }
  process.stdout.write(joinLines(restLines(r, advice, values.advice === false ? 0 : changes), answer.at(-1)));
  if (values.summary) process.stdout.write('\n' + r.memory_summary);
}

export const simulateCommand = {
  summary: 'predict the peak GPU memory of a plan (docs/plan-format.md)',
  usage,
  run,
};
