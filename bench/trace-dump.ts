/**
 * Developer tool: a recorded calibration run's allocation trace, one line per event: index, action, allocation
 * id, bytes, allocated bytes after it, and the Python frames when the run was recorded with --stacks.
 * `node bench/trace-dump.ts NAME [FROM [TO]]` (NAME of test/fixtures/calibration/NAME.json, or a path).
 */
import { readFileSync, existsSync } from 'node:fs';
import { maybeGunzip } from '../engine/snapshot/gzip.ts';
import { readPickle } from '../engine/snapshot/pickle.ts';

const arg = process.argv[2]!;
const from = Number(process.argv[3] ?? 0), to = Number(process.argv[4] ?? 200);
const base = arg.endsWith('.json') ? arg.slice(0, -5) : new URL(`../test/fixtures/calibration/${arg}`, import.meta.url).pathname;
const file = [base + '.pickle.gz', base + '.pickle'].find((f) => existsSync(f))!;
const raw = readPickle(maybeGunzip(readFileSync(file))) as { device_traces: { action: string; addr: number; size: number; frames?: { name: string; filename: string; line: number }[] }[][] };
const trace = raw.device_traces[0]!;
const ids = new Map<number, number>();
let n = 0, allocated = 0, k = 0;
for (const e of trace) {
  if (e.action === 'free_requested') continue;
  if (e.action === 'alloc') { ids.set(e.addr, ++n); allocated += e.size; }
  if (e.action === 'free_completed') allocated -= e.size;
  if (k >= from && k < to) {
    const frames = (e.frames ?? []).filter((f) => !f.filename.includes('torch/')).slice(0, 2).map((f) => `${f.name}:${f.line}`).join(' < ');
    console.log(String(k).padStart(6), e.action.padEnd(14), String(ids.get(e.addr) ?? '').padStart(6), String(e.size).padStart(12), String(allocated).padStart(13), frames);
  }
  k++;
}
console.log('events', k);
