import { readFileSync } from 'node:fs';
import { parsePlan } from '../engine/plan/parse.ts';
import { simulate } from '../engine/train/simulate.ts';
import { planGpu } from '../cli/gpus.ts';
const m = JSON.parse(readFileSync(process.argv[2]!, 'utf8'));
const plan = parsePlan(m.plan);
const ids = new Map<number, number>(); let n = 0; let k = 0;
const lo = Number(process.argv[3]), hi = Number(process.argv[4]);
simulate(plan, { device: planGpu(plan), onTrace: (a, addr, size, _s, label) => { if (a === 'free_requested') return; if (a === 'alloc') ids.set(addr, ++n); if (k >= lo && k < hi) console.log(k, a, ids.get(addr) ?? '', size, label ?? ''); k++; } });
