/**
 * Whole-process timings of the `memplan` command (issue #15): each command run as a user runs it, in a new Node
 * process, the median of 3 (these 2-core machines are noisy). Prints the table: command, now, target; then
 * the same commands with their advice (`--advice`: by default the commands compute it only for a plan that does
 * not fit, and these fit). Also when the answer is printed: `simulate` and `max-batch` print it before they simulate
 * the advice.
 * The command timed is the one `npm run build` makes (dist/cli/memplan.js: what `memplan` runs once installed or
 * linked), built here first from the current source; the last row runs the TypeScript itself, as
 * `npm run memplan` and `node cli/memplan.ts` do, which compiles ~90 modules on start.
 * Run by `npm run bench` (bench/run.ts) and on its own: `node bench/cli.ts [runs]`.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const runs = Number(process.argv[2] ?? 3);
const root = new URL('..', import.meta.url).pathname;
const built = new URL('../dist/cli/memplan.js', import.meta.url).pathname;
const source = new URL('../cli/memplan.ts', import.meta.url).pathname;
const build = spawnSync(process.execPath, [new URL('../node_modules/rolldown/bin/cli.mjs', import.meta.url).pathname, '-c', 'rolldown.config.ts'], { cwd: root, encoding: 'utf8' });
if (build.status !== 0) throw new Error(`building the command failed: ${build.stderr}`);
const dir = mkdtempSync(join(tmpdir(), 'memplan-bench-'));

const plan = (name: string, model: unknown, training: Record<string, unknown>, gpu: Record<string, unknown>) => {
  const file = join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify({ format: 'memplan.plan', version: 1, name, model, training, gpu }));
  return file;
};
const GiB = 2 ** 30;
const TiB = 2 ** 40;
const xl = plan('gpt2-xl', { preset: 'gpt2-xl' }, { batch_size: 4, seq_len: 1024, precision: 'amp_bf16', optimizer: 'adamw' }, { name: 'h100-sxm' });
const xl80 = plan('gpt2-xl-80g', { preset: 'gpt2-xl' }, { batch_size: 4, seq_len: 1024, precision: 'amp_bf16', optimizer: 'adamw' }, { memory_limit_bytes: 80 * GiB });
const llama70 = (cap: number) =>
  plan(`llama-2-70b-${cap / TiB}t`, { preset: 'llama-2-70b' }, { batch_size: 1, seq_len: 4096, precision: 'bf16', activation_checkpointing: true }, { memory_limit_bytes: cap });
const llama405 = (cap: number) =>
  plan(
    `llama-405b-${cap / TiB}t`,
    {
      hf_config: {
        model_type: 'llama',
        hidden_size: 16384,
        intermediate_size: 53248,
        num_hidden_layers: 126,
        num_attention_heads: 128,
        num_key_value_heads: 8,
        vocab_size: 128256,
        max_position_embeddings: 131072,
      },
    },
    { batch_size: 1, seq_len: 4096, precision: 'bf16', activation_checkpointing: true },
    { memory_limit_bytes: cap },
  );

const rows: { label: string; args: string[]; target: string; cli?: string }[] = [
  { label: 'GPT-2 XL (batch 4, seq 1024, AMP bf16, AdamW) `simulate`', args: ['simulate', xl], target: '<= 0.2 s' },
  { label: 'GPT-2 XL `max-batch` on an 80 GiB cap', args: ['max-batch', xl80], target: '<= 0.5 s' },
  { label: 'Llama-2-70B-shaped (bf16, batch 1, seq 4096, checkpointing) `simulate`', args: ['simulate', llama70(2 * TiB)], target: '<= 0.4 s' },
  { label: 'the same `max-batch` on a 2 TiB custom GPU', args: ['max-batch', llama70(2 * TiB)], target: '<= 1.5 s' },
  { label: '405B-shaped Llama `simulate` (8 TiB)', args: ['simulate', llama405(8 * TiB)], target: '<= 0.8 s' },
  { label: '405B-shaped Llama `max-batch` on 8 TiB', args: ['max-batch', llama405(8 * TiB)], target: '<= 3 s' },
  // With the advice asked for (each change is a simulation or a search of its own): what a plan that does not fit
  // gets by default.
  { label: 'GPT-2 XL `simulate --advice`', args: ['simulate', xl, '--advice'], target: '' },
  { label: 'GPT-2 XL `max-batch --advice` on an 80 GiB cap', args: ['max-batch', xl80, '--advice'], target: '' },
  { label: 'Llama-2-70B-shaped `simulate --advice`', args: ['simulate', llama70(2 * TiB), '--advice'], target: '' },
  { label: 'Llama-2-70B-shaped `max-batch --advice` on 2 TiB', args: ['max-batch', llama70(2 * TiB), '--advice'], target: '' },
  // The TypeScript run from source (`npm run memplan`, `node cli/memplan.ts`): the same work, more start-up.
  { label: 'GPT-2 XL `simulate`, from source (`node cli/memplan.ts`)', args: ['simulate', xl], target: '', cli: source },
];

/** One run: seconds to the first output (the answer: the advice and the trials follow) and to the process's end. */
const timed = (args: string[], cli = built) =>
  new Promise<{ first: number; total: number }>((resolve, reject) => {
    const start = performance.now();
    let first = NaN;
    let stderr = '';
    const child = spawn(process.execPath, [cli, ...args]);
    child.stdout.on('data', () => {
      if (Number.isNaN(first)) first = (performance.now() - start) / 1000;
    });
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('close', (code) => {
      if (code !== 0) reject(new Error(`memplan ${args.join(' ')} failed: ${stderr}`));
      else resolve({ first, total: (performance.now() - start) / 1000 });
    });
  });
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log('The commands as a user runs them: these plans fit, so no advice unless asked (--advice rows below).');
console.log(`| command | now (median of ${runs}, whole process) | the answer printed (median) | target |`);
console.log('|---|---|---|---|');
try {
  for (const row of rows) {
    const times: { first: number; total: number }[] = [];
    for (let i = 0; i < runs; i++) times.push(await timed(row.args, row.cli));
    const totals = times.map((t) => t.total).sort((a, b) => a - b);
    console.log(`| ${row.label} | ${median(totals).toFixed(2)} s (${totals.map((t) => t.toFixed(2)).join(', ')}) | ${median(times.map((t) => t.first)).toFixed(2)} s | ${row.target || '-'} |`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
