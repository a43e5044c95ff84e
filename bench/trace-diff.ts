/**
 * Developer tool: where does the simulated allocation sequence first differ from a recorded calibration run?
 * `node bench/trace-diff.ts NAME` (NAME of test/fixtures/calibration/NAME.json). Prints the peaks and the
 * events around the first difference (alloc/free with an id per allocation, and segment events).
 */
import { readFileSync } from 'node:fs';
import { maybeGunzip } from '../engine/snapshot/gzip.ts';
import { readPickle } from '../engine/snapshot/pickle.ts';
import { parseSnapshot } from '../engine/snapshot/snapshot.ts';
import { parsePlan } from '../engine/plan/parse.ts';
import { simulate } from '../engine/train/simulate.ts';
import { planGpu } from '../cli/gpus.ts';
// NAME of test/fixtures/calibration, or a path to a measurement .json with its .pickle(.gz) beside it
const arg = process.argv[2]!;
const base = arg.endsWith('.json') ? arg.slice(0, -5) : new URL(`../test/fixtures/calibration/${arg}`, import.meta.url).pathname;
const meta = JSON.parse(readFileSync(base + '.json', 'utf8'));
const pickleFile = [base + '.pickle.gz', base + '.pickle'].find((f) => { try { readFileSync(f); return true; } catch { return false; } })!;
const real = parseSnapshot(readPickle(maybeGunzip(readFileSync(pickleFile)))).trace.filter(e => e.action === 'alloc' || e.action === 'free_completed' || e.action.startsWith('segment'));
const sim: { action: string; size: number; addr: number; label?: string }[] = [];
const labels: string[] = [];
const plan = parsePlan(meta.cap?.allowed_bytes ? { ...meta.plan, gpu: { memory_limit_bytes: meta.cap.allowed_bytes } } : meta.plan);
const res = simulate(plan, { device: planGpu(plan), untilSteady: false, onTrace: (action, addr, size, _stream, label) => { if (action !== 'free_requested') sim.push({ action, size, addr, label }); } });
console.log('real peak', meta.peak_allocated_bytes, meta.peak_reserved_bytes, ' sim', res.peakAllocatedBytes, res.peakReservedBytes);
// compare alloc/free sequences by size, with ids
const norm = (tr: { action: string; size: number; addr: number }[]) => { const ids = new Map<number, number>(); let n = 0; return tr.map(e => { if (e.action === 'alloc') ids.set(e.addr, ++n); return `${e.action} ${e.action.startsWith('segment') ? '' : ids.get(e.addr)} ${e.size}`; }); };
// A run of frees leaves the same allocator state in any order (merging is order-free), and some PyTorch frees come
// in hash-map order (the autocast cache): compare runs of consecutive frees as sorted sets.
const sortFreeRuns = (xs: string[]) => { const out: string[] = []; let run: string[] = []; for (const x of xs) { if (x.startsWith('free_completed')) run.push(x); else { out.push(...run.sort(), x); run = []; } } return [...out, ...run.sort()]; };
const a = sortFreeRuns(norm(real)), b = sortFreeRuns(norm(sim));
let i = 0; while (i < Math.min(a.length, b.length) && a[i] === b[i]) i++;
console.log('events real', a.length, 'sim', b.length, 'first difference at', i);
const before = Number(process.env.BEFORE ?? 5), after = Number(process.env.AFTER ?? 12);
for (let k = Math.max(0, i - before); k < Math.min(Math.max(a.length, b.length), i + after); k++) console.log(k, (a[k] ?? '').padEnd(40), b[k] ?? '');
