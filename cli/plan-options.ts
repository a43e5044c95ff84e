/**
 * The options `simulate` and `max-batch` share: quick what-ifs that override the plan file's fields without
 * editing it (`--batch-size 16 --precision amp_bf16`), and which GPU and memory cap it runs on. An override is
 * written into the plan before it is checked, so it is validated exactly as the plan's own field is, and a
 * problem is reported at the flag (`--batch-size (training.batch_size): must be a positive integer, got 0`).
 */
import { DEFAULT_GPU, InputError, InputIssuesError, findGpu, memoryAvailableToPyTorch, safeParsePlan, type Device, type GpuSpec, type Plan } from '../engine/index.ts';
import { parseFraction, parseMemoryCap } from './args.ts';
import { readJsonFile } from './files.ts';
import { gpuCatalog, gpuDevice, planGpu } from './gpus.ts';

/** A training field a flag overrides: the flag, the plan's key (docs/plan-format.md), and how its text reads. */
interface TrainingOverride {
  flag: string;
  field: keyof Plan['training'];
  kind: 'integer' | 'name' | 'checkpointing';
  /** For --help: the value's placeholder, then what it sets with an example ('' for a second name of a flag). */
  help: string;
}

/** The plan's own vocabulary: each flag is its training field's name with dashes. */
const TRAINING_OVERRIDES: readonly TrainingOverride[] = [
  { flag: 'batch-size', field: 'batch_size', kind: 'integer', help: 'N training.batch_size (micro-batch), e.g. --batch-size 16' },
  { flag: 'seq-len', field: 'seq_len', kind: 'integer', help: 'N training.seq_len, e.g. --seq-len 2048' },
  { flag: 'image-size', field: 'image_size', kind: 'integer', help: 'N training.image_size, e.g. --image-size 384' },
  { flag: 'precision', field: 'precision', kind: 'name', help: 'P fp32, amp_fp16, amp_bf16, bf16 or fp16, e.g. --precision amp_bf16' },
  { flag: 'optimizer', field: 'optimizer', kind: 'name', help: 'O sgd, sgd_momentum, adam or adamw, e.g. --optimizer sgd' },
  { flag: 'optimizer-impl', field: 'optimizer_impl', kind: 'name', help: 'I foreach, fused or for_loop, e.g. --optimizer-impl fused' },
  { flag: 'grad-accumulation-steps', field: 'grad_accumulation_steps', kind: 'integer', help: 'N training.grad_accumulation_steps (also --grad-accum N), e.g. --grad-accum 4' },
  { flag: 'grad-accum', field: 'grad_accumulation_steps', kind: 'integer', help: '' },
  { flag: 'checkpointing', field: 'activation_checkpointing', kind: 'checkpointing', help: 'C none, non_reentrant or reentrant (training.activation_checkpointing), e.g. --checkpointing non_reentrant' },
  { flag: 'attention', field: 'attention', kind: 'name', help: 'A sdpa or eager, e.g. --attention eager' },
];

/** `parseArgs` options of the shared flags. */
export const PLAN_OPTIONS = {
  gpu: { type: 'string' },
  'memory-limit': { type: 'string' },
  'memory-limit-bytes': { type: 'string' },
  'memory-fraction': { type: 'string' },
  'alloc-conf': { type: 'string' },
  ...Object.fromEntries(TRAINING_OVERRIDES.map((o) => [o.flag, { type: 'string' }])),
} as const satisfies Record<string, { type: 'string' }>;

/** The shared flags in a command's --help. */
export function planOptionsHelp(gpuAll: boolean): string {
  return [
    `  --gpu NAME               a GPU of the catalog (memplan gpus), e.g. --gpu a100-40gb${gpuAll ? '; "all": every GPU of the catalog' : ''}`,
    '  --memory-limit SIZE      cap reserved memory (what set_per_process_memory_fraction imposes), e.g. 40GiB, 40GB,',
    '                           40960MiB or bytes; --memory-limit-bytes is the same flag',
    '  --memory-fraction F      cap at F of the GPU\'s memory as set_per_process_memory_fraction(F) does, e.g. 0.9',
    '  --alloc-conf STRING      PYTORCH_CUDA_ALLOC_CONF, e.g. --alloc-conf expandable_segments:True',
    ...TRAINING_OVERRIDES.filter((o) => o.help).map((o) => {
      const [arg, ...words] = o.help.split(/\s+/);
      return `  ${`--${o.flag} ${arg}`.padEnd(24)} ${words.join(' ')}`;
    }),
  ].join('\n');
}

type Values = Record<string, string | boolean | (string | boolean)[] | undefined>;

const CHECKPOINTING: Record<string, false | 'non_reentrant' | 'reentrant'> = {
  none: false,
  false: false,
  off: false,
  non_reentrant: 'non_reentrant',
  'non-reentrant': 'non_reentrant',
  true: 'non_reentrant',
  on: 'non_reentrant',
  reentrant: 'reentrant',
};

/** A flag's text as the plan field's JSON value (the schema then checks it as it checks the file's). */
function overrideValue(o: TrainingOverride, text: string): unknown {
  switch (o.kind) {
    case 'integer':
      if (!/^\s*-?\d+\s*$/.test(text)) throw new InputError(`--${o.flag}`, `expected a whole number, got "${text}"`);
      return Number(text);
    case 'checkpointing': {
      const value = CHECKPOINTING[text.trim().toLowerCase()];
      if (value === undefined) throw new InputError(`--${o.flag}`, `expected none, non_reentrant or reentrant, got "${text}"`);
      return value;
    }
    case 'name':
      return text.trim();
  }
}

/** Which plan field each given flag sets (plan field path -> flag), for the messages that name the flag. */
function flagFields(values: Values, gpuName: string | undefined): Map<string, string> {
  const flags = new Map<string, string>();
  for (const o of TRAINING_OVERRIDES) if (typeof values[o.flag] === 'string') flags.set(`training.${o.field}`, `--${o.flag}`);
  if (typeof values['alloc-conf'] === 'string') flags.set('allocator.conf', '--alloc-conf');
  if (gpuName !== undefined) flags.set('gpu.name', '--gpu');
  return flags;
}

/** The plan file with the flags' overrides written in, and which field each flag set (for its messages). */
function overriddenPlanValue(file: string, values: Values, gpuName: string | undefined): { value: unknown; flags: Map<string, string> } {
  const value = readJsonFile(file);
  const flags = flagFields(values, gpuName);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { value, flags };
  const plan = { ...(value as Record<string, unknown>) };
  const given = TRAINING_OVERRIDES.filter((o) => typeof values[o.flag] === 'string');
  const twice = given.find((o, i) => given.findIndex((p) => p.field === o.field) !== i);
  if (twice) {
    const first = given.find((o) => o.field === twice.field)!;
    throw new InputError(`--${twice.flag}`, `--${first.flag} already sets training.${twice.field}; give one of them`);
  }
  if (given.length) {
    const training = typeof plan['training'] === 'object' && plan['training'] !== null ? { ...(plan['training'] as object) } : {};
    for (const o of given) (training as Record<string, unknown>)[o.field] = overrideValue(o, values[o.flag] as string);
    plan['training'] = training;
  }
  if (typeof values['alloc-conf'] === 'string') plan['allocator'] = { conf: values['alloc-conf'] };
  if (gpuName !== undefined) plan['gpu'] = { name: gpuName };
  return { value: plan, flags };
}

/**
 * The plan file, read and checked with the flags' overrides applied. Problems in the file name the file; a
 * problem in a flag's value names the flag and the plan field it sets.
 */
export function readPlanWithOverrides(file: string, values: Values, gpuName?: string): Plan {
  const { value, flags } = overriddenPlanValue(file, values, gpuName);
  const parsed = safeParsePlan(value, { catalog: gpuCatalog() });
  if (parsed.ok) return parsed.plan;
  throw new InputIssuesError(
    parsed.issues.map((issue) => {
      const flag = flags.get(issue.path);
      if (flag) return { path: flag === '--gpu' ? flag : `${flag} (${issue.path})`, message: issue.message };
      return { path: issue.path ? `${file}: ${issue.path}` : file, message: issue.message };
    }),
  );
}

/**
 * A problem the engine found while simulating the plan (a field it cannot simulate, a target that matches no
 * module), named as readPlanWithOverrides names a plan's problems: by the flag that set the field, else with the
 * file, so that a script running many plans can tell which one failed. Other errors pass through.
 */
export function namedForPlanFile(error: unknown, file: string, values: Values, gpuName?: string): unknown {
  if (!(error instanceof InputError) || error instanceof InputIssuesError || !/^(training|model|allocator)\./.test(error.where)) return error;
  const flag = [...flagFields(values, gpuName)].find(([path]) => error.where === path || error.where.startsWith(`${path}.`))?.[1];
  return new InputError(flag ? `${flag} (${error.where})` : `${file}: ${error.where}`, error.problem);
}

/** The memory cap the flags ask for: bytes, or a fraction of the GPU; at most one of them. */
function capFlags(values: Values): { limitBytes?: number; limitFlag?: string; fraction?: number } {
  const limitFlags = (['memory-limit', 'memory-limit-bytes'] as const).filter((f) => typeof values[f] === 'string');
  if (limitFlags.length > 1) throw new InputError('--memory-limit', 'given twice (--memory-limit and --memory-limit-bytes are the same flag)');
  const limitFlag = limitFlags[0] && `--${limitFlags[0]}`;
  const limitBytes = limitFlags[0] ? parseMemoryCap(limitFlag!, values[limitFlags[0]] as string) : undefined;
  const fraction = parseFraction('--memory-fraction', values['memory-fraction'] as string | undefined);
  if (limitBytes !== undefined && fraction !== undefined) throw new InputError('--memory-fraction', `give ${limitFlag} or --memory-fraction, not both`);
  return { limitBytes, limitFlag, fraction };
}

/** What the flags ask of the GPU, checked before any plan is read. */
export interface GpuChoice {
  /** `--gpu`, as given (`all` for every catalog GPU). */
  gpu?: string;
  limitBytes?: number;
  limitFlag?: string;
  fraction?: number;
}

export function gpuChoice(values: Values): GpuChoice {
  const gpu = typeof values['gpu'] === 'string' ? values['gpu'] : undefined;
  return { gpu, ...capFlags(values) };
}

/**
 * `set_per_process_memory_fraction(F)` keeps `allowed_memory_maximum = static_cast<size_t>(F * totalGlobalMem)`
 * (c10/cuda/CUDACachingAllocator.cpp, setMemoryFraction): the product in double precision, truncated.
 */
export function fractionCapBytes(fraction: number, gpu: GpuSpec): number {
  return Math.floor(fraction * gpu.total_memory_bytes);
}

/**
 * The plan on the GPU and under the cap the flags ask for. A cap applies to `--gpu`, else the plan's GPU, else the
 * default one; a byte cap larger than that GPU can give PyTorch describes a custom GPU (docs/plan-format.md),
 * unless `--gpu` named the GPU, where it is a mistake.
 */
export function placePlan(plan: Plan, choice: GpuChoice): { plan: Plan; device: Device } {
  if (choice.limitBytes === undefined && choice.fraction === undefined) return { plan, device: planGpu(plan) };
  const gpu = findGpu(gpuCatalog(), plan.gpu && 'name' in plan.gpu ? plan.gpu.name : DEFAULT_GPU);
  if (choice.fraction !== undefined) {
    const cap = fractionCapBytes(choice.fraction, gpu);
    if (cap < 2_097_152) throw new InputError('--memory-fraction', `${choice.fraction} of ${gpu.id} is ${cap} bytes, less than the smallest segment PyTorch reserves (2 MiB)`);
    return { plan: { ...plan, gpu: { memory_limit_bytes: cap } }, device: gpuDevice(plan, gpu) };
  }
  const cap = choice.limitBytes!;
  const capped: Plan = { ...plan, gpu: { memory_limit_bytes: cap } };
  if (cap <= memoryAvailableToPyTorch(gpu)) return { plan: capped, device: gpuDevice(plan, gpu) };
  if (choice.gpu !== undefined) {
    throw new InputError(choice.limitFlag!, `${cap} bytes is more than ${gpu.id} can give PyTorch (${memoryAvailableToPyTorch(gpu)} bytes, its memory less the CUDA context and library handles); leave out --gpu to simulate a custom GPU of that size`);
  }
  return { plan: capped, device: planGpu(capped) };
}
