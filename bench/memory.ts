/**
 * The engine's own memory for a 70B model, in a process of its own: Node's resident memory after loading the
 * engine, then its peak while simulating Llama 2 70B (bf16, batch 1, seq 2048, checkpointing) to steady state.
 * Run by bench/run.ts; `node bench/memory.ts` alone prints the same lines.
 */
const { parsePlan } = await import('../engine/plan/parse.ts');
const { simulate } = await import('../engine/train/simulate.ts');
const { planGpu } = await import('../cli/gpus.ts');
const plan = parsePlan({
  format: 'memplan.plan',
  version: 1,
  model: { preset: 'llama-2-70b' },
  training: { batch_size: 1, seq_len: 2048, precision: 'bf16', activation_checkpointing: true },
  gpu: { memory_limit_bytes: 2 * 2 ** 40 },
});
const device = planGpu(plan);
const baseline = process.memoryUsage().rss;
const result = simulate(plan, { device });
const peak = process.resourceUsage().maxRSS * 1024;
console.log(
  `engine memory for Llama 2 70B (${result.steps.length} steps, ${result.timeline.event.length} timeline points kept): ` +
    `${((peak - baseline) / 2 ** 20).toFixed(0)} MB above the ${(baseline / 2 ** 20).toFixed(0)} MB of a Node process with the engine loaded (target < 200 MB); peak RSS ${(peak / 2 ** 20).toFixed(0)} MB`,
);
