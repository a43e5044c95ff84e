/**
 * `npm run bench`: speed figures, printed. Targets (issue #3): replay at least 2 million trace events a second
 * on a 2-core machine. Run on the recorded H100 traces in test/fixtures/traces.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { Bench } from 'tinybench';
import { maybeGunzip } from '../engine/snapshot/gzip.ts';
import { readPickle } from '../engine/snapshot/pickle.ts';
import { parseSnapshot, type MemorySnapshot } from '../engine/snapshot/snapshot.ts';
import { replaySnapshot } from '../engine/snapshot/replay.ts';

const dir = new URL('../test/fixtures/traces/', import.meta.url);
const files = readdirSync(dir).filter((f) => f.endsWith('.pickle.gz')).sort();
if (files.length === 0) throw new Error('no traces in test/fixtures/traces');

interface Loaded {
  name: string;
  raw: Uint8Array;
  snapshot: MemorySnapshot;
  meta: { alloc_conf: string | null; memory_limit_bytes: number | null; total_memory: number };
}
const traces: Loaded[] = files.map((f) => {
  const name = f.replace(/\.pickle\.gz$/, '');
  const raw = maybeGunzip(readFileSync(new URL(f, dir)));
  return {
    name,
    raw,
    snapshot: parseSnapshot(readPickle(raw)),
    meta: JSON.parse(readFileSync(new URL(`${name}.json`, dir), 'utf8')),
  };
});
const totalEvents = traces.reduce((n, t) => n + t.snapshot.trace.length, 0);
const totalBytes = traces.reduce((n, t) => n + t.raw.length, 0);

const bench = new Bench({ time: 2000, warmupTime: 300 });
bench.add(`replay all ${traces.length} traces (${totalEvents} events)`, () => {
  for (const t of traces) {
    replaySnapshot(t.snapshot, {
      allocConf: t.meta.alloc_conf ?? '',
      memoryLimitBytes: t.meta.memory_limit_bytes ?? undefined,
      totalGlobalMemBytes: t.meta.total_memory,
    });
  }
});
bench.add(`parse all snapshot pickles (${(totalBytes / 1e6).toFixed(1)} MB)`, () => {
  for (const t of traces) parseSnapshot(readPickle(t.raw));
});
await bench.run();

const [replay, parse] = bench.tasks.map((t) => t.result);
const meanMs = (r: typeof replay) => (r && 'latency' in r ? r.latency.mean : NaN);
const replayMs = meanMs(replay);
const parseMs = meanMs(parse);
console.log(`replay: ${replayMs.toFixed(1)} ms per pass -> ${((totalEvents / replayMs) * 1000 / 1e6).toFixed(2)} million trace events/s (target >= 2)`);
console.log(`snapshot parsing: ${parseMs.toFixed(1)} ms per pass -> ${((totalBytes / parseMs) * 1000 / 1e6).toFixed(1)} MB/s, ${((totalEvents / parseMs) * 1000 / 1e6).toFixed(2)} million events/s`);

// Simulating training steps: a large layer list (80 residual blocks of RMSNorm and two 4096x14336 linears, about
// 9.7 billion parameters, bf16 with fused AdamW), to show how the engine scales with model size.
const { parsePlan } = await import('../engine/plan/parse.ts');
const { simulate } = await import('../engine/train/simulate.ts');
const { findMaxBatch } = await import('../engine/search/max-batch.ts');
const { planGpu } = await import('../cli/gpus.ts');
const big = parsePlan({
  format: 'memplan.plan',
  version: 1,
  name: 'bench: 80 wide blocks',
  model: {
    input_features: 4096,
    layers: [
      { type: 'repeat', count: 80, layers: [{ type: 'residual', layers: [{ type: 'rms_norm', normalized_shape: 4096 }, { type: 'linear', in_features: 4096, out_features: 14336, bias: false }, { type: 'silu' }, { type: 'linear', in_features: 14336, out_features: 4096, bias: false }] }] },
      { type: 'linear', in_features: 4096, out_features: 32000 },
    ],
  },
  training: { batch_size: 8, precision: 'bf16', optimizer: 'adamw', optimizer_impl: 'fused' },
  gpu: { name: 'h200' },
});
const device = planGpu(big);
simulate(big, { device }); // warm up
let t0 = performance.now();
const result = simulate(big, { device });
const simulateMs = performance.now() - t0;
console.log(`simulate a ${(result.model.parameter_count / 1e9).toFixed(1)}B-parameter layer list, ${result.steps.length} steps (to steady state): ${simulateMs.toFixed(0)} ms`);
t0 = performance.now();
const search = findMaxBatch(big, { device });
console.log(`max-batch search on it (H200): ${(performance.now() - t0).toFixed(0)} ms over ${search.trials.length} trials (max batch ${search.max_batch})`);
console.log(`process peak memory (max RSS, everything above included): ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MB`);

// The targets on real architectures: GPT-2 XL (all steps to steady state, and the whole search on an
// 80 GB GPU) and a 70B Llama (Llama 2 70B in bf16 on a custom GPU large enough to hold its training state).
const presetPlan = (preset: string, training: Record<string, unknown>, gpu: Record<string, unknown>) =>
  parsePlan({ format: 'memplan.plan', version: 1, model: { preset }, training, gpu });
const xl = presetPlan('gpt2-xl', { batch_size: 4, seq_len: 1024, precision: 'amp_bf16' }, { name: 'h100-sxm' });
const xlDevice = planGpu(xl);
/** The median of n timed runs after a warm-up (these 2-core machines are noisy). */
const median = (n: number, fn: () => unknown) => {
  fn();
  const times = Array.from({ length: n }, () => {
    const start = performance.now();
    fn();
    return performance.now() - start;
  }).sort((a, b) => a - b);
  return times[Math.floor(n / 2)]!;
};
const xlResult = simulate(xl, { device: xlDevice });
console.log(`simulate GPT-2 XL (batch 4, seq 1024, AMP bf16, AdamW), ${xlResult.steps.length} steps, full result: median ${median(9, () => simulate(xl, { device: xlDevice })).toFixed(0)} ms of 9 (target < 50)`);
t0 = performance.now();
const xlSearch = findMaxBatch(xl, { device: xlDevice });
console.log(`max-batch search, GPT-2 XL on an H100: ${(performance.now() - t0).toFixed(0)} ms over ${xlSearch.trials.length} trials (max batch ${xlSearch.max_batch}; target < 1000)`);
const llama70 = presetPlan('llama-2-70b', { batch_size: 1, seq_len: 2048, precision: 'bf16', activation_checkpointing: true }, { memory_limit_bytes: 2 * 2 ** 40 });
const llamaDevice = planGpu(llama70);
const rssBefore = process.memoryUsage().rss;
const llamaResult = simulate(llama70, { device: llamaDevice });
console.log(`simulate Llama 2 70B (bf16, batch 1, seq 2048, checkpointing), ${llamaResult.steps.length} steps: median ${median(5, () => simulate(llama70, { device: llamaDevice })).toFixed(0)} ms of 5 (target < 300); peak ${(llamaResult.peak_allocated_bytes / 2 ** 30).toFixed(0)} GiB`);
t0 = performance.now();
const llamaSearch = findMaxBatch(llama70, { device: llamaDevice });
console.log(`max-batch search, Llama 2 70B on a 2 TiB custom GPU: ${(performance.now() - t0).toFixed(0)} ms over ${llamaSearch.trials.length} trials (max batch ${llamaSearch.max_batch}; target < 3000)`);
console.log(`resident memory grew by ${((process.memoryUsage().rss - rssBefore) / 2 ** 20).toFixed(0)} MB during the 70B runs; process peak (max RSS) ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MB`);

// The engine's own memory, measured in a fresh process (this one has held snapshots and other models).
const { spawnSync } = await import('node:child_process');
const memory = spawnSync(process.execPath, [new URL('./memory.ts', import.meta.url).pathname], { encoding: 'utf8' });
process.stdout.write(memory.stdout || memory.stderr);

// The app's engine worker, warm (issue #9): the same host the renderer's Web Worker runs (engine/worker/host.ts),
// driven here through its message protocol with the worker's MessageChannel yield. Structured cloning and painting
// are not included: the browser tests print the time from an edit to the result on screen.
{
  const { createEngineHost } = await import('../engine/worker/host.ts');
  const catalogJson = JSON.parse(readFileSync(new URL('../resources/gpus.json', import.meta.url), 'utf8'));
  const { gunzipSync } = await import('node:zlib');
  const host = createEngineHost({
    catalog: catalogJson,
    convTable: async () => JSON.parse(gunzipSync(readFileSync(new URL('../resources/cudnn-workspaces-h100.json.gz', import.meta.url))).toString('utf8')),
    yieldToEventLoop: () =>
      new Promise<void>((resolve) => {
        const channel = new MessageChannel();
        channel.port1.onmessage = () => {
          channel.port1.close();
          resolve();
        };
        channel.port2.postMessage(null);
      }),
  });
  const xlPlan = { format: 'memplan.plan', version: 1, model: { preset: 'gpt2-xl' }, training: { batch_size: 4, seq_len: 1024, precision: 'amp_bf16', optimizer: 'adamw' }, gpu: { name: 'h100-sxm' } };
  let id = 0;
  const simulateOnce = async (plan: typeof xlPlan = xlPlan) => {
    const start = performance.now();
    let kind = '';
    await host.handle({ kind: 'simulate', id: ++id, plan }, (answer) => (kind = answer.kind));
    if (kind !== 'simulate_result') throw new Error(`the worker answered ${kind}`);
    return performance.now() - start;
  };
  await simulateOnce(); // the first request pays for module state (the warm worker has done one)
  const warm = Array.from({ length: 9 }, () => 0);
  for (let i = 0; i < warm.length; i++) warm[i] = await simulateOnce();
  warm.sort((a, b) => a - b);
  console.log(`the app's worker, warm: GPT-2 XL (batch 4, seq 1024, AMP bf16, AdamW) re-simulated in median ${warm[4]!.toFixed(0)} ms of 9 (min ${warm[0]!.toFixed(0)}, max ${warm[8]!.toFixed(0)}; the same plan again: its run replayed, Note [Replayed runs])`);
  // After an edit (issue #15's row): each request a plan the worker has not simulated (another sequence length).
  const edited = Array.from({ length: 9 }, (_, i) => ({ ...xlPlan, training: { ...xlPlan.training, seq_len: 1000 - 8 * i } }));
  const afterEdit: number[] = [];
  for (const plan of edited) afterEdit.push(await simulateOnce(plan));
  afterEdit.sort((a, b) => a - b);
  console.log(`the app's worker, warm: GPT-2 XL re-simulated after an edit (9 sequence lengths, each new) in median ${afterEdit[4]!.toFixed(0)} ms (min ${afterEdit[0]!.toFixed(0)}, max ${afterEdit[8]!.toFixed(0)}; target 15 ms; on screen within 100 ms)`);
  const start = performance.now();
  let first = NaN;
  let trials = 0;
  let answer: { max_batch: number } | null = null;
  await host.handle({ kind: 'max_batch', id: ++id, plan: xlPlan }, (a) => {
    if (a.kind === 'trial' && trials++ === 0) first = performance.now() - start;
    if (a.kind === 'max_batch_result') answer = a.result;
  });
  if (!answer) throw new Error('the worker gave no max-batch result');
  console.log(`the app's worker, warm: max-batch GPT-2 XL on an H100: first trial after ${first.toFixed(0)} ms, answer (${(answer as { max_batch: number }).max_batch}) after ${(performance.now() - start).toFixed(0)} ms over ${trials} trials (targets: 100 ms, 1 s)`);
}

// The memplan command as a user runs it (issue #15): whole processes, the median of 3, in a table.
console.log('');
const cliTable = spawnSync(process.execPath, [new URL('./cli.ts', import.meta.url).pathname], { encoding: 'utf8' });
process.stdout.write(cliTable.stdout || cliTable.stderr);
