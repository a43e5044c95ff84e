/**
 * `npm run bench:accuracy`: predicted vs real peaks over the calibration runs recorded on an H100
 * (test/fixtures/calibration). Targets (issue #4): peak allocated median error <= 1%, worst <= 3%;
 * peak reserved median <= 3%, worst <= 8%.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { InputError } from '../engine/errors.ts';
import { formatSize } from '../engine/allocator/format.ts';
import { parsePlan } from '../engine/plan/parse.ts';
import { simulate } from '../engine/train/simulate.ts';
import { planGpu } from '../cli/gpus.ts';

const dir = new URL('../test/fixtures/calibration/', import.meta.url);
const names = readdirSync(dir).filter((f) => f.endsWith('.json')).map((f) => f.replace(/\.json$/, '')).sort();
const pct = (x: number) => `${(x * 100).toFixed(2)}%`;
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? (s[(s.length - 1) >> 1]! + s[s.length >> 1]!) / 2 : NaN;
};
const allocatedErrors: number[] = [];
const reservedErrors: number[] = [];
let skipped = 0;
console.log(`${'case'.padEnd(52)} ${'real alloc'.padStart(11)} ${'sim alloc'.padStart(11)} ${'err'.padStart(7)}  ${'real resv'.padStart(11)} ${'sim resv'.padStart(11)} ${'err'.padStart(7)}`);
for (const name of names) {
  const m = JSON.parse(readFileSync(new URL(`${name}.json`, dir), 'utf8'));
  if (m.status !== 'ok') continue;
  try {
    const r = (() => { const plan = parsePlan(m.plan); return simulate(plan, { device: planGpu(plan), untilSteady: false }); })();
    const ea = Math.abs(r.peak_allocated_bytes - m.peak_allocated_bytes) / m.peak_allocated_bytes;
    const er = Math.abs(r.peak_reserved_bytes - m.peak_reserved_bytes) / m.peak_reserved_bytes;
    allocatedErrors.push(ea);
    reservedErrors.push(er);
    console.log(
      `${name.padEnd(52)} ${formatSize(m.peak_allocated_bytes).padStart(11)} ${formatSize(r.peak_allocated_bytes).padStart(11)} ${pct(ea).padStart(7)}  ${formatSize(m.peak_reserved_bytes).padStart(11)} ${formatSize(r.peak_reserved_bytes).padStart(11)} ${pct(er).padStart(7)}`,
    );
  } catch (error) {
    if (!(error instanceof InputError)) throw error;
    skipped++;
    console.log(`${name.padEnd(52)} not simulated yet: ${error.message}`);
  }
}
console.log('');
console.log(`simulated ${allocatedErrors.length} of ${allocatedErrors.length + skipped} cases`);
if (allocatedErrors.length) {
  console.log(`peak allocated: median error ${pct(median(allocatedErrors))}, worst ${pct(Math.max(...allocatedErrors))} (targets 1%, 3%)`);
  console.log(`peak reserved:  median error ${pct(median(reservedErrors))}, worst ${pct(Math.max(...reservedErrors))} (targets 3%, 8%)`);
}

// Largest batch: predicted vs real searches on the H100 (test/fixtures/maxbatch). Target (issue #5): within 2%
// of the real one, never above it by more than that.
const { findMaxBatch } = await import('../engine/search/max-batch.ts');
const searchDir = new URL('../test/fixtures/maxbatch/', import.meta.url);
console.log('');
console.log(`${'max-batch search'.padEnd(52)} ${'real'.padStart(7)} ${'sim'.padStart(7)} ${'diff'.padStart(8)}  time`);
for (const f of readdirSync(searchDir).filter((f) => f.endsWith('.json')).sort()) {
  const m = JSON.parse(readFileSync(new URL(f, searchDir), 'utf8'));
  const name = f.replace('.maxbatch.json', '');
  try {
    const plan = parsePlan({ ...m.plan, gpu: { memory_limit_bytes: m.cap.allowed_bytes } });
    const t0 = performance.now();
    const r = findMaxBatch(plan, { device: planGpu(parsePlan(m.plan)), untilSteady: false }); // the real searches ran 3 steps a trial
    const ms = performance.now() - t0;
    console.log(`${name.padEnd(52)} ${String(m.max_batch).padStart(7)} ${String(r.max_batch).padStart(7)} ${pct((r.max_batch - m.max_batch) / m.max_batch).padStart(8)}  ${ms.toFixed(0)} ms`);
  } catch (error) {
    if (!(error instanceof InputError)) throw error;
    console.log(`${name.padEnd(52)} ${String(m.max_batch).padStart(7)} not simulated yet`);
  }
}

// The boundary suite (issue 10): real searches on the H100 whose every trial ran 6 steps in a fresh process.
// Targets: never above the largest that fit; at most 2% below (1 below under 50); simulated peak reserved at the
// verified largest within 1% of the real one. Known failures print the allocation found to differ.
{
  const { loadSuite, evaluateCase } = await import('./boundary-suite.ts');
  const suite = loadSuite();
  console.log('');
  console.log('targets: sim never above real; at most 2% below (1 below under 50); peak reserved at the real largest within 1%');
  console.log(`${'boundary suite (fresh process, 6 steps)'.padEnd(52)} ${'real'.padStart(8)} ${'sim'.padStart(8)} ${'diff'.padStart(8)} ${'resv err'.padStart(9)} ${'unstable'.padStart(9)}  target`);
  let met = 0;
  const known: string[] = [];
  for (const c of suite) {
    const o = evaluateCase(c);
    if (o.ok) met++;
    if (c.known_failure) known.push(`  ${c.name}: ${c.known_failure}`);
    const diff = pct((o.predicted - c.largest_fresh) / c.largest_fresh);
    const resv = o.reservedError === null ? '-' : pct(o.reservedError);
    const verdict = o.ok ? 'met' : !o.neverAbove ? 'ABOVE' : !o.closeBelow ? 'too far below' : 'reserved off';
    console.log(`${c.name.padEnd(52)} ${String(c.largest_fresh).padStart(8)} ${String(o.predicted).padStart(8)} ${diff.padStart(8)} ${resv.padStart(9)} ${(o.unstableRegion ?? '-').padStart(9)}  ${verdict}${c.known_failure ? ' (known)' : ''}`);
  }
  console.log(`targets met in ${met} of ${suite.length} cases${known.length ? '; known failures:' : ''}`);
  for (const line of known) console.log(line);
}

// Attention as an A100 runs it (issue 14): searches on the H100 with cuDNN attention off (flash attention, and the
// memory-efficient kernel where SDPA gets a mask), each trial 6 steps in a fresh process
// (test/fixtures/boundary-a100-sdpa.json); simulated with the H100's figures and an A100's compute capability.
{
  const { readFileSync } = await import('node:fs');
  const { parsePlan } = await import('../engine/plan/parse.ts');
  const { findMaxBatch } = await import('../engine/search/max-batch.ts');
  const { planGpu } = await import('../cli/gpus.ts');
  const suite = JSON.parse(readFileSync(new URL('../test/fixtures/boundary-a100-sdpa.json', import.meta.url), 'utf8')) as {
    searches: { name: string; largest: number | null; trials: { batch: number; fits: boolean }[] }[];
  };
  console.log('');
  console.log(`${'as an A100 runs attention (fresh process, 6 steps)'.padEnd(56)} ${'real'.padStart(6)} ${'sim'.padStart(6)}  target`);
  let met = 0;
  let complete = 0;
  for (const c of suite.searches) {
    const raw = JSON.parse(readFileSync(new URL(`../resources/measure/scenarios/boundary/${c.name.replace(/_a100sdpa$/, '')}.json`, import.meta.url), 'utf8'));
    const plan = parsePlan(raw);
    const predicted = findMaxBatch(plan, { device: { ...planGpu(plan), compute_capability: [8, 0] } }).max_batch;
    // an unfinished search: its largest fitting trial with the next ones running out is what it found so far
    const fitting = c.trials.filter((t) => t.fits).map((t) => t.batch);
    const real = c.largest ?? Math.max(...fitting);
    if (c.largest !== null) complete++;
    const ok = c.largest !== null && predicted === real;
    if (ok) met++;
    console.log(`${c.name.padEnd(56)} ${String(real).padStart(6)} ${String(predicted).padStart(6)}  ${c.largest === null ? `unfinished (${c.trials.filter((t) => !t.fits).map((t) => t.batch).join(', ')} ran out)` : ok ? 'exact' : 'MISSED'}`);
  }
  console.log(`found exactly in ${met} of ${complete} finished searches`);
}
