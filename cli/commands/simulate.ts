/** `memplan simulate PLAN.json`: the predicted memory of a training run, as PyTorch's allocator would report it. */
import { InputError } from '../../engine/errors.ts';
import { formatSize } from '../../engine/allocator/format.ts';
import { simulate } from '../../engine/train/simulate.ts';
import { advise } from '../../engine/search/advice.ts';
import { planGpu } from '../gpus.ts';
import { parseCommandArgs } from '../args.ts';
import { readPlanFile } from '../files.ts';

const usage = `Usage: memplan simulate PLAN.json [--json] [--summary]

Simulates the plan's training steps (docs/plan-format.md) through PyTorch's tensors, autograd and CUDA caching
allocator, and prints what torch.cuda.max_memory_allocated() and max_memory_reserved() would report.

Options:
  --json      print one JSON object
  --summary   also print torch.cuda.memory_summary() as it would read at the end`;

async function run(args: string[]): Promise<void> {
  const { values, positionals } = parseCommandArgs('simulate', args, {
    json: { type: 'boolean', default: false },
    summary: { type: 'boolean', default: false },
  });
  if (positionals.length !== 1) throw new InputError('memplan simulate', 'expected exactly one plan file');
  const file = positionals[0]!;
  const plan = readPlanFile(file);
  const device = planGpu(plan);
  const r = simulate(plan, { device });
  const advice = advise(plan, { device, basePeakReservedBytes: r.peakReservedBytes });
  if (values.json) {
    process.stdout.write(
      JSON.stringify({
        plan: plan.name || file,
        peak_allocated_bytes: r.peakAllocatedBytes,
        peak_reserved_bytes: r.peakReservedBytes,
        nvidia_smi_bytes: r.nvidiaSmiBytes,
        peak_at: r.peakAt,
        breakdown_at_peak: r.breakdownAtPeak,
        largest_at_peak: r.largestAtPeak,
        steps: r.steps,
        parameter_count: r.parameterCount,
        parameter_bytes: r.parameterBytes,
        oom: r.oom,
        memory_stats: r.memoryStats,
        timeline: r.timeline,
        advice: advice.map((a) => ({ id: a.id, change: a.change, cost: a.cost, peak_reserved_bytes: a.peakReservedBytes, saved_bytes: a.savedBytes, fits: a.fits })),
        notes: r.notes,
      }) + '\n',
    );
    return;
  }
  const b = r.breakdownAtPeak;
  const lines = [
    `${plan.name || file}: ${r.parameterCount.toLocaleString('en-US')} parameters (${formatSize(r.parameterBytes)})`,
    r.oom ? `OUT OF MEMORY in step ${r.oom.step} (${r.oom.phase}): ${r.oom.message}` : '',
    `max_memory_allocated()  ${formatSize(r.peakAllocatedBytes)}   (step ${r.peakAt.step}, ${r.peakAt.phase})`,
    `max_memory_reserved()   ${formatSize(r.peakReservedBytes)}`,
    `nvidia-smi (approx.)    ${formatSize(r.nvidiaSmiBytes)}`,
    '',
    'At the peak:',
    ...Object.entries(b)
      .filter(([, v]) => v > 0)
      .map(([k, v]) => `  ${k.replace('_', ' ').padEnd(18)} ${formatSize(v)}`),
    '',
    'Largest tensors at the peak:',
    ...r.largestAtPeak.slice(0, 8).map((t) => `  ${formatSize(t.bytes).padStart(12)}  ${t.label}`),
    '',
    'Per step (peak allocated / reserved):',
    ...r.steps.map((s) => `  step ${s.step}: ${formatSize(s.peakAllocatedBytes)} / ${formatSize(s.peakReservedBytes)}`),
    '',
    'What changes would save (peak reserved, each simulated on its own):',
    ...advice.map((a) => `  ${(a.savedBytes > 0 ? '-' : a.savedBytes < 0 ? '+' : ' ') + formatSize(Math.abs(a.savedBytes))}`.padEnd(14) + `${a.change}${a.fits ? '' : ' (still out of memory)'}; ${a.cost}`),
    '',
    ...r.notes.map((n) => `Note: ${n}`),
  ];
  process.stdout.write(lines.filter((l, i, a) => !(l === '' && (i === 0 || a[i - 1] === ''))).join('\n') + '\n');
  if (values.summary) process.stdout.write('\n' + r.memorySummary);
}

export const simulateCommand = {
  summary: 'predict the peak GPU memory of a plan (docs/plan-format.md)',
  usage,
  run,
};
