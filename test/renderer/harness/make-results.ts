/**
 * Real engine results for the result views' harness: the example plans (and a few variants: out of memory, nothing
 * fits) simulated and searched, written as JSON (the result schemas, Note [Timeline JSON]) to the folder given.
 * `node_modules/.bin/node test/renderer/harness/make-results.ts /tmp/mp/data`
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { parsePlanText } from '../../../engine/plan/parse.ts';
import { simulate } from '../../../engine/train/simulate.ts';
import { findMaxBatch } from '../../../engine/search/max-batch.ts';
import { advise } from '../../../engine/search/advice.ts';
import { planGpu } from '../../../engine/gpu/device.ts';
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
  const advice = advise(plan, { device, basePeakReservedBytes: r.peak_reserved_bytes });
  writeFileSync(`${out}/${key}.simulate.json`, stringifyResult({ result: r, advice }));
  console.log(key, 'simulate fits', r.fits, 'points', r.timeline.event.length, 'advice', advice.advice.length);
}
function mb(key: string, plan: any) {
  const device = planGpu(plan, catalog, conv);
  const r = findMaxBatch(plan, { device });
  let extra: any = {};
  if (r.max_batch === 0) {
    const one = simulate({ ...plan, training: { ...plan.training, batch_size: 1 }, gpu: { name: 'b200' } }, { device: planGpu({ ...plan, gpu: { name: 'b200' } }, catalog, conv), timelinePoints: 0, peakDetails: false });
    extra = { needs_bytes: one.peak_reserved_bytes, fits_on: catalog.gpus.filter((g: any) => g.total_memory_bytes - g.non_pytorch_bytes >= one.peak_reserved_bytes).map((g: any) => ({ id: g.id, name: g.name })) };
  }
  const advice = r.max_batch > 0 ? advise(plan, { device, goal: 'batch', maxBatch: r }) : null;
  writeFileSync(`${out}/${key}.maxbatch.json`, stringifyResult({ result: r, advice, ...extra }));
  console.log(key, 'max batch', r.max_batch, 'trials', r.trials.length);
}
sim('gpt2', load('gpt2-config-json.plan.json'));
sim('llama', load('llama-3-8b-bf16.plan.json'));
sim('resnet', load('resnet50-amp.plan.json'));
sim('gpt2-oom', load('gpt2-config-json.plan.json', { batch_size: 48 }, 'rtx-4090'));
sim('gpt2-tight', load('gpt2-config-json.plan.json', { batch_size: 100 }));
sim('gpt2-fp32', load('gpt2-config-json.plan.json', { precision: 'fp32', batch_size: 16, attention: 'eager' }, 'a100-40gb'));
mb('gpt2', load('gpt2-config-json.plan.json'));
mb('resnet', load('resnet50-amp.plan.json'));
mb('llama-none', load('llama-3-8b-bf16.plan.json', {}, 'rtx-4090'));
