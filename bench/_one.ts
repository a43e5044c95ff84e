import { readFileSync } from 'node:fs';
import { parsePlan } from '../engine/plan/parse.ts';
import { simulate } from '../engine/train/simulate.ts';
import { planGpu } from '../cli/gpus.ts';
for (const f of process.argv.slice(2)) {
  const m = JSON.parse(readFileSync(f, 'utf8'));
  const plan = parsePlan({ ...m.plan, gpu: { memory_limit_bytes: m.cap.allowed_bytes } });
  const r = simulate(plan, { device: planGpu(parsePlan(m.plan)) });
  console.log(f.split('/').pop(), 'real', m.status, m.peak_allocated_bytes, m.peak_reserved_bytes, '| sim', r.oom ? 'oom' : 'ok', r.peakAllocatedBytes, r.peakReservedBytes);
}
