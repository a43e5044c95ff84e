/** The worker host, called directly as the renderer's worker calls it: streaming, cancel, stale requests, errors as values. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import catalog from '../../../resources/gpus.json' with { type: 'json' };
import { createEngineHost, engineAnswerSchema, maybeGunzip, memoryAvailableToPyTorch, type EngineAnswer } from '../../../engine/index.ts';

const convTable = async () => JSON.parse(new TextDecoder().decode(maybeGunzip(readFileSync(new URL('../../../resources/cudnn-workspaces-h100.json.gz', import.meta.url)))));
const mlp = JSON.parse(readFileSync(new URL('../../../examples/mlp-fp16.plan.json', import.meta.url), 'utf8')) as Record<string, unknown>;

/** A host and everything it posted, each answer checked against the protocol and structured-cloned as a worker would. */
function setup() {
  const host = createEngineHost({ catalog, convTable });
  const answers: EngineAnswer[] = [];
  const post = (a: EngineAnswer) => {
    const cloned = structuredClone(a); // must survive postMessage
    expect(engineAnswerSchema.safeParse(cloned).success, JSON.stringify(engineAnswerSchema.safeParse(cloned).error?.issues.slice(0, 3))).toBe(true);
    answers.push(cloned);
  };
  return { host, answers, post };
}

describe('engine worker host', () => {
  it('answers simulate with a result of the schema (typed-array timeline included)', async () => {
    const { host, answers, post } = setup();
    await host.handle({ kind: 'simulate', id: 1, plan: mlp }, post);
    expect(answers.map((a) => a.kind)).toEqual(['simulate_result']);
    const a = answers[0]!;
    if (a.kind !== 'simulate_result') throw new Error('unreachable');
    expect(a.id).toBe(1);
    expect(a.result.timeline.reserved_max).toBeInstanceOf(Float64Array);
    expect(a.result.peak_reserved_bytes).toBeGreaterThan(0);
  });

  it('answers an invalid plan with every issue at its field path', async () => {
    const { host, answers, post } = setup();
    const plan = { ...mlp, training: { batch_size: '8', batchsize: 3, precision: 'fp8' }, gpu: { name: 'h100-sxn' } };
    await host.handle({ kind: 'simulate', id: 2, plan }, post);
    expect(answers).toHaveLength(1);
    const a = answers[0]!;
    if (a.kind !== 'invalid_plan') throw new Error(`expected invalid_plan, got ${a.kind}`);
    const paths = a.issues.map((i) => i.path);
    expect(paths).toEqual(expect.arrayContaining(['training.batch_size', 'training.batchsize', 'training.precision']));
    expect(a.issues.find((i) => i.path === 'training.batchsize')!.message).toContain('did you mean "batch_size"');
  });

  it('streams max-batch trials and stops between them when cancelled', async () => {
    const { host, answers, post } = setup();
    const running = host.handle({ kind: 'max_batch', id: 3, plan: { ...mlp, gpu: { memory_limit_bytes: 2 ** 31 } } }, (a) => {
      post(a);
      // cancel after the third trial, as the user presses the button while the search runs
      if (answers.filter((x) => x.kind === 'trial').length === 3) void host.handle({ kind: 'cancel', id: 3 }, post);
    });
    await running;
    const kinds = answers.map((a) => a.kind);
    expect(kinds.filter((k) => k === 'trial')).toHaveLength(3);
    expect(kinds.at(-1)).toBe('cancelled');
    expect(kinds).not.toContain('max_batch_result');
  });

  it('finishes a search: trials, then the result with the same trials', async () => {
    const { host, answers, post } = setup();
    await host.handle({ kind: 'max_batch', id: 4, plan: { ...mlp, gpu: { memory_limit_bytes: 2 ** 31 } } }, post);
    const trials = answers.filter((a) => a.kind === 'trial').map((a) => (a.kind === 'trial' ? a.trial : null));
    const last = answers.at(-1)!;
    if (last.kind !== 'max_batch_result') throw new Error(`expected max_batch_result, got ${last.kind}`);
    expect(last.result.trials).toEqual(trials);
    expect(last.result.max_batch).toBeGreaterThan(0);
  });

  it('a new request of the same kind supersedes a running one (the stale one answers cancelled)', async () => {
    const { host, answers, post } = setup();
    const first = host.handle({ kind: 'max_batch', id: 5, plan: { ...mlp, gpu: { memory_limit_bytes: 2 ** 31 } } }, post);
    const second = host.handle({ kind: 'max_batch', id: 6, plan: { ...mlp, gpu: { memory_limit_bytes: 2 ** 30 } } }, post);
    await Promise.all([first, second]);
    expect(answers.filter((a) => a.id === 5).at(-1)!.kind).toBe('cancelled');
    expect(answers.filter((a) => a.id === 6).at(-1)!.kind).toBe('max_batch_result');
    expect(answers.some((a) => a.id === 5 && a.kind === 'max_batch_result')).toBe(false);
  });

  it('streams advice item by item, then the ranked advice with what is not advised', async () => {
    const { host, answers, post } = setup();
    await host.handle({ kind: 'advice', id: 7, plan: mlp }, post);
    const last = answers.at(-1)!;
    if (last.kind !== 'advice_done') throw new Error(`expected advice_done, got ${last.kind}`);
    const items = answers.filter((a) => a.kind === 'advice_item');
    expect(items).toHaveLength(last.result.advice.length);
    expect(last.result.advice.length + last.result.not_applicable.length).toBeGreaterThanOrEqual(6);
  });

  it('advises for a larger batch after the plan\'s own search, and can be cancelled during that search', async () => {
    const { host, answers, post } = setup();
    const plan = { ...mlp, gpu: { memory_limit_bytes: 2 ** 31 } };
    await host.handle({ kind: 'advice', id: 14, plan, goal: 'batch' }, post);
    const done = answers.at(-1)!;
    if (done.kind !== 'advice_done') throw new Error(`expected advice_done, got ${done.kind}`);
    expect(done.result.goal).toBe('batch');
    expect(done.result.base_max_effective_batch).toBeGreaterThan(0);
    const running = host.handle({ kind: 'advice', id: 15, plan, goal: 'batch' }, post);
    await new Promise((r) => setTimeout(r, 0));
    await host.handle({ kind: 'cancel', id: 15 }, post);
    await running;
    expect(answers.filter((a) => a.id === 15).map((a) => a.kind)).toEqual(['cancelled']);
  });

  it('replays a snapshot with progress, and a corrupt one as an error value', async () => {
    const { host, answers, post } = setup();
    const bytes = readFileSync(new URL('../../fixtures/traces/oom_under_cap.pickle.gz', import.meta.url));
    await host.handle({ kind: 'replay', id: 8, bytes: bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) }, post);
    expect(answers[0]!.kind).toBe('progress');
    const last = answers.at(-1)!;
    if (last.kind !== 'replay_result') throw new Error(`expected replay_result, got ${last.kind}`);
    expect(last.result.timeline.real_reserved_max).toBeInstanceOf(Float64Array);
    await host.handle({ kind: 'replay', id: 9, bytes: new Uint8Array([1, 2, 3]).buffer }, post);
    const error = answers.at(-1)!;
    expect(error.kind).toBe('error');
    if (error.kind === 'error') expect(error.internal).toBeUndefined();
  });

  it('answers a message that is not a request with an error, not a crash', async () => {
    const { host, answers, post } = setup();
    await host.handle({ kind: 'frobnicate', id: 10 }, post);
    expect(answers).toEqual([expect.objectContaining({ kind: 'error', id: 10 })]);
  });

  it('a plan that fits nowhere: the result says what batch 1 needs and on which catalog GPUs it fits, as the CLI does', async () => {
    const { host, answers, post } = setup();
    const llama = JSON.parse(readFileSync(new URL('../../../examples/llama-3-8b-bf16.plan.json', import.meta.url), 'utf8')) as Record<string, unknown>;
    await host.handle({ kind: 'max_batch', id: 16, plan: { ...llama, gpu: { name: 'rtx-4090' } } }, post);
    const last = answers.at(-1)!;
    if (last.kind !== 'max_batch_result') throw new Error(`expected max_batch_result, got ${last.kind}`);
    const r = last.result;
    expect(r.max_batch).toBe(0);
    expect(r.needed!.peak_reserved_bytes).toBeGreaterThan(r.cap_bytes);
    const ids = r.needed!.fits_on.map((g) => g.id);
    // Llama 3 8B with fused AdamW needs about 61 GiB at batch 1: the 80 GB class and larger, not the 24 GB cards
    expect(ids).toEqual(expect.arrayContaining(['h100-sxm', 'h200', 'a100-80gb']));
    expect(ids).not.toContain('rtx-4090');
    expect(ids).not.toContain('a100-40gb');
    for (const g of r.needed!.fits_on) {
      const entry = catalog.gpus.find((c) => c.id === g.id)!;
      expect(g.available_bytes).toBe(memoryAvailableToPyTorch(entry));
      expect(g.available_bytes).toBeGreaterThanOrEqual(r.needed!.peak_reserved_bytes!);
    }
  });

  it('simulate and max-batch results carry what they assume and how confident memplan is', async () => {
    const { host, answers, post } = setup();
    await host.handle({ kind: 'simulate', id: 17, plan: { ...mlp, gpu: { name: 'a100-40gb' } } }, post);
    await host.handle({ kind: 'max_batch', id: 18, plan: { ...mlp, gpu: { memory_limit_bytes: 2 ** 31 } } }, post);
    const sim = answers.find((a) => a.kind === 'simulate_result');
    const mb = answers.find((a) => a.kind === 'max_batch_result');
    if (sim?.kind !== 'simulate_result' || mb?.kind !== 'max_batch_result') throw new Error('expected both results');
    expect(sim.result.caveats!.confidence).toBe('medium');
    expect(sim.result.caveats!.items).toContainEqual({ id: 'workspaces_from_h100', gpu: 'a100-40gb' });
    expect(mb.result.caveats!.confidence).toBe('high');
    expect(mb.result.caveats!.items).toContainEqual({ id: 'calibrated_gpu', gpu: 'h100-sxm' });
  });

  it('fetches the convolution table only for a plan that has convolutions, once', async () => {
    let fetched = 0;
    const host = createEngineHost({ catalog, convTable: async () => (fetched++, convTable()) });
    const answers: EngineAnswer[] = [];
    await host.handle({ kind: 'simulate', id: 11, plan: mlp }, (a) => answers.push(a));
    expect(fetched).toBe(0);
    const resnet = { format: 'memplan.plan', version: 1, model: { preset: 'resnet18' }, training: { batch_size: 8, steps: 1 } };
    await host.handle({ kind: 'simulate', id: 12, plan: resnet }, (a) => answers.push(a));
    await host.handle({ kind: 'simulate', id: 13, plan: resnet }, (a) => answers.push(a));
    expect(fetched).toBe(1);
    expect(answers.map((a) => a.kind)).toEqual(['simulate_result', 'simulate_result', 'simulate_result']);
  });
});
