/**
 * The writer that durability.test.ts kills: opens plans.sqlite as the app does (openStorage) and saves plans through
 * the real PlanStore, with arguments parsed by the IPC contract as the handler would, as fast as it can, until it is
 * killed. After each save returns it writes one line to stdout, `{"op","id","batch","rev","with_result"}`: that line
 * is the acknowledgement the test holds the database to. Writers of one lane run one after another (the previous one
 * killed before the next starts) and replace the lane's plans (a newer `rev` in the notes) more often than they add
 * one, so the database stays a few hundred plans and each writer starts as fast as the first. Some saves carry a
 * real simulate result (the file named by argv[5]).
 *
 * Run with Node 24: `node durability-writer.ts <database> <lane> <writer> <seed> <result.json>`.
 */
import { readFileSync, writeSync } from 'node:fs';
import { flushCompileCache } from 'node:module';
import { contract } from '../../../electron/common/ipc.ts';
import { openStorage } from '../../../electron/main/storage/index.ts';

const [path, laneArg, writerArg, seedArg, resultPath] = process.argv.slice(2);
if (!path || !laneArg || !writerArg || !seedArg || !resultPath) throw new Error('usage: durability-writer.ts <database> <lane> <writer> <seed> <result.json>');
const lane = Number(laneArg);
const writer = Number(writerArg);
/** A lane keeps about this many plans; past it, a save adds a plan one time in ten. */
const LANE_PLANS = 100;
let seed = Number(seedArg) >>> 0;
/** mulberry32: a small seeded generator, so a failing run can be repeated. */
function random(): number {
  seed = (seed + 0x6d2b79f5) >>> 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}

// A killed process never writes its compile cache (NODE_COMPILE_CACHE) at exit: write it now, so the next writer
// starts in ~0.1 s.
flushCompileCache();

const result = JSON.parse(readFileSync(resultPath, 'utf8')) as Record<string, unknown>;
const storage = openStorage(path);
// The lane's plans as its earlier writers left them (names `lane L plan B`, notes `rev R ...`).
const mine = storage.plans.list(`lane${lane}`).plans.map((p) => ({ id: p.id, batch: Number(p.name.split(' ').at(-1)), rev: Number(/^rev (\d+)/.exec(p.notes)![1]) }));
writeSync(1, 'ready\n');
for (let n = 0; ; n++) {
  const insert = mine.length < LANE_PLANS || random() < 0.1;
  const update = insert ? null : mine[Math.floor(random() * mine.length)]!;
  const batch = update?.batch ?? writer * 1_000_000 + n + 1;
  const rev = update ? update.rev + 1 : 0;
  const withResult = random() < 0.3;
  const args = contract['plans:save'].args.parse({
    ...(update ? { id: update.id } : {}),
    name: `lane ${lane} plan ${batch}`,
    plan: {
      format: 'memplan.plan',
      version: 1,
      model: { input_features: 1024, layers: [{ type: 'linear', in_features: 1024, out_features: 4096 }, { type: 'relu' }, { type: 'linear', in_features: 4096, out_features: 10 }] },
      training: { batch_size: batch, precision: 'amp_bf16', optimizer: 'adamw' },
      gpu: { name: 'h100-sxm' },
    },
    notes: `rev ${rev} ${'x'.repeat(Math.floor(random() * 4000))}`,
    tags: ['durability', `lane${lane}`],
    ...(withResult ? { result } : {}),
  });
  const saved = storage.plans.save(args);
  if (update) update.rev = rev;
  else mine.push({ id: saved.id, batch, rev });
  // Only now, after save returned: the acknowledgement.
  writeSync(1, `${JSON.stringify({ op: update ? 'update' : 'insert', id: saved.id, batch, rev, with_result: withResult })}\n`);
}
