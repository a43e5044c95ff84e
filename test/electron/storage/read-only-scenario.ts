/**
 * One read-only scenario of read-only.test.ts, run in a process of its own: when the test runs as root, without the
 * capabilities that let root ignore file modes (else chmod would not bind), else as the test's user. It saves two plans, makes the
 * file or the folder read-only, opens the database as the app does, then makes it writable again and opens it once
 * more, and prints one JSON line: the open's error, the file's bytes before and after (sha256), the plans found.
 *
 * `node read-only-scenario.ts <folder> <readonly-file | readonly-folder | readonly-folder-new>`
 */
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { openStorage } from '../../../electron/main/storage/index.ts';

const [folder, scenario] = process.argv.slice(2);
if (!folder || !scenario) throw new Error('usage: read-only-scenario.ts <folder> <scenario>');
const data = join(folder, 'data');
const path = join(data, 'plans.sqlite');
mkdirSync(data, { recursive: true });
const hash = () => (existsSync(path) ? createHash('sha256').update(readFileSync(path)).digest('hex') : null);
const plan = (batch: number) => ({ format: 'memplan.plan', version: 1, model: { preset: 'resnet50' }, training: { batch_size: batch }, gpu: { name: 'a100-80gb' } });

if (scenario !== 'readonly-folder-new') {
  const storage = openStorage(path);
  for (const batch of [32, 64]) storage.plans.save({ name: `kept ${batch}`, plan: plan(batch), notes: '', tags: [] });
  storage.close();
}
const before = hash();
if (scenario === 'readonly-file') chmodSync(path, 0o444);
else chmodSync(data, 0o555);

let error: { name: string; code: string | null; message: string } | null = null;
try {
  openStorage(path).close();
} catch (e) {
  error = { name: (e as Error).name, code: (e as { code?: string }).code ?? null, message: (e as Error).message };
}
const after = hash();

chmodSync(data, 0o755);
if (existsSync(path)) chmodSync(path, 0o644);
const reopened = openStorage(path);
const names = reopened.plans.list().plans.map((p) => p.name).sort();
reopened.close();
/** Whether this process may ignore file modes: CAP_DAC_OVERRIDE (bit 1), CAP_DAC_READ_SEARCH (2) or CAP_FOWNER (3) in its effective set. */
const effective = /^CapEff:\s*([0-9a-f]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
const overrides = effective === undefined ? null : (BigInt(`0x${effective}`) & 0b1110n) !== 0n;
console.log(JSON.stringify({ uid: process.getuid?.(), overrides, path, error, before, after, names }));
