/**
 * Real engine results for the result views' harness: the example plans (and a few variants: out of memory, nothing
 * fits) simulated and searched, written as JSON (the result schemas, Note [Timeline JSON]) to the folder given.
 * `node_modules/.bin/node test/renderer/harness/make-results.ts /tmp/mp/data`
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { parsePlanText } from '../../../engine/plan/parse.ts';
import { UNBOUNDED_MEMORY_BYTES, simulate } from '../../../engine/train/simulate.ts';
import { findMaxBatch } from '../../../engine/search/max-batch.ts';
import { advise } from '../../../engine/search/advice.ts';
import { deviceFor, planGpu } from '../../../engine/gpu/device.ts';
import { parseGpuCatalog } from '../../../engine/gpu/catalog.ts';
import { stringifyResult } from '../../../engine/result/json.ts';

const root = new URL('../../../', import.meta.url);
const ex = new URL('examples/', root).pathname;
const out = process.argv[2] ?? '/tmp/mp/data';
mkdirSync(out, { recursive: true });
const catalog = parseGpuCatalog(JSON.parse(readFileSync(new URL('resources/gpus.json', root), 'utf8')));
const conv = JSON.parse(gunzipSync(readFileSync(new URL('resources/cudnn-workspaces-h100.json.gz', root))).toString());
function load(file: string, overrides: any = {}, gpuName?: string) {
  const p = parsePlanText(readFileSync(ex + file, 'utf8'));
  return { ...p, training: { ...p.training, ...overrides }, ...(gpuName ? { gpu: { name: gpuName } } : {}) } as any;
}
function sim(key: string, plan: any) {
  const device = planGpu(plan, catalog, conv);
  const r = simulate(plan, { device });
  // as the CLI passes it: a plan that runs out is measured by what it needs with no cap (Note [Advice for a plan that does not fit])
  const advice = advise(plan, { device, basePeakReservedBytes: r.fits ? r.peak_reserved_bytes : (r.needed_bytes ?? UNBOUNDED_MEMORY_BYTES), baseFits: r.fits });
  writeFileSync(`${out}/${key}.simulate.json`, stringifyResult({ result: r, advice }));
  console.log(key, 'simulate fits', r.fits, 'points', r.timeline.event.length, 'advice', advice.advice.length);
}
function mb(key: string, plan: any) {
  const device = planGpu(plan, catalog, conv);
  // the catalog, as the worker host passes it: a plan that fits nowhere says where it would (`needed.fits_on`)
  const r = findMaxBatch(plan, { device, catalog: catalog.gpus.map((g) => deviceFor(g, conv)) });
  const advice = r.max_batch > 0 ? advise(plan, { device, goal: 'batch', maxBatch: r }) : null;
  writeFileSync(`${out}/${key}.maxbatch.json`, stringifyResult({ result: r, advice }));
  console.log(key, 'max batch', r.max_batch, 'trials', r.trials.length, 'unstable', JSON.stringify(r.unstable_region), 'fits on', r.needed?.fits_on.map((g) => g.id).join(','));
}
/** BERT-large MLM, AMP fp16, non-reentrant checkpointing, seq 512, under 16 GiB: fit is not monotonic at 44-47 (test/engine/search/non-monotonic.test.ts). */
const suite = JSON.parse(readFileSync(new URL('test/fixtures/boundary-suite/suite.json', root), 'utf8'));
const bert = parsePlanText(JSON.stringify((suite.cases ?? suite).find((c: any) => c.name === 'bert_large_amp_fp16_ckpt_seq512_cap16g').plan));
sim('gpt2', load('gpt2-config-json.plan.json'));
sim('llama', load('llama-3-8b-bf16.plan.json'));
sim('resnet', load('resnet50-amp.plan.json'));
sim('gpt2-oom', load('gpt2-config-json.plan.json', { batch_size: 48 }, 'rtx-4090'));
sim('gpt2-tight', load('gpt2-config-json.plan.json', { batch_size: 100 }));
sim('gpt2-fp32', load('gpt2-config-json.plan.json', { precision: 'fp32', batch_size: 16, attention: 'eager' }, 'a100-40gb'));
mb('gpt2', load('gpt2-config-json.plan.json'));
mb('resnet', load('resnet50-amp.plan.json'));
mb('llama-none', load('llama-3-8b-bf16.plan.json', {}, 'rtx-4090'));
sim('llama-oom', load('llama-3-8b-bf16.plan.json', {}, 'rtx-4090'));
mb('bert-unstable', bert);
