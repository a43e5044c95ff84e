/**
 * Developer tool: where does the simulated allocation sequence first differ from a recorded calibration run?
 * `node bench/trace-diff.ts NAME` (NAME of test/fixtures/calibration/NAME.json). Prints the peaks and the
 * events around the first difference (alloc/free with an id per allocation, and segment events).
 */
import { readFileSync } from 'node:fs';
import { maybeGunzip } from '../engine/snapshot/gzip.ts';
import { readPickle } from '../engine/snapshot/pickle.ts';
import { parseSnapshot } from '../engine/snapshot/snapshot.ts';
import { comparableTrace } from '../engine/snapshot/compare.ts';
import { parsePlan } from '../engine/plan/parse.ts';
import { simulate } from '../engine/train/simulate.ts';
import { planGpu } from '../cli/gpus.ts';
// NAME of test/fixtures/calibration, or a path to a measurement .json with its .pickle(.gz) beside it
const arg = process.argv[2]!;
const base = arg.endsWith('.json') ? arg.slice(0, -5) : new URL(`../test/fixtures/calibration/${arg}`, import.meta.url).pathname;
const meta = JSON.parse(readFileSync(base + '.json', 'utf8'));
const pickleFile = [base + '.pickle.gz', base + '.pickle'].find((f) => { try { readFileSync(f); return true; } catch { return false; } })!;
const real = parseSnapshot(readPickle(maybeGunzip(readFileSync(pickleFile)))).trace;
const sim: { action: string; size: number; addr: number }[] = [];
const plan = parsePlan(meta.cap?.allowed_bytes ? { ...meta.plan, gpu: { memory_limit_bytes: meta.cap.allowed_bytes } } : meta.plan);
const res = simulate(plan, { device: planGpu(plan), untilSteady: false, onTrace: (action, addr, size) => sim.push({ action, size, addr }) });
console.log('real peak', meta.peak_allocated_bytes, meta.peak_reserved_bytes, ' sim', res.peak_allocated_bytes, res.peak_reserved_bytes);
// NO_OOM=1 leaves out `oom` entries: PyTorch retries a failed cuDNN plan a varying number of times, which changes
// nothing in the allocator
const dropOom = (t: string[]) => (process.env.NO_OOM ? t.filter((e) => !e.startsWith('oom')) : t);
const a = dropOom(comparableTrace(real)), b = dropOom(comparableTrace(sim));
// SKIP=n: report the first difference after position n (to walk past an understood one)
let i = Number(process.env.SKIP ?? 0); while (i < Math.min(a.length, b.length) && a[i] === b[i]) i++;
console.log('events real', a.length, 'sim', b.length, 'first difference at', i);
const before = Number(process.env.BEFORE ?? 5), after = Number(process.env.AFTER ?? 12);
// frees annotated with the size their allocation had
const sizes = (t: string[]) => { const m = new Map<string, string>(); for (const e of t) { const [act, id, size] = e.split(' '); if (act === 'alloc') m.set(id!, size!); } return m; };
const sa = sizes(a), sb = sizes(b);
const show = (e: string | undefined, m: Map<string, string>) => (e?.startsWith('free') ? `${e} (${m.get(e.split(' ')[1]!)})` : e ?? '');
for (let k = Math.max(0, i - before); k < Math.min(Math.max(a.length, b.length), i + after); k++) console.log(k, show(a[k], sa).padEnd(40), show(b[k], sb));
