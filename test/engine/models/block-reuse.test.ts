/**
 * Note [Reused blocks] (engine/models/block-reuse.ts): a simulation whose repeated blocks replay recordings of
 * other blocks gives what the simulation running every block's code gives: every field, with peak details (what is
 * live at the peak, by label) and without (as a search's trial runs), the timeline event by event. On every
 * calibration plan of a family that reuses its layers (GPT-2, BERT, Gemma, ViT and the Llama family), made 11 layers
 * deep (layers 1 to 9 of one kind, 3 to 7 replayed; Gemma's sliding and global layers each a kind of their own), and on the boundary
 * suite's at and above their largest batch; then under caps that run out of memory inside replayed blocks'
 * forwards and backwards, some inside frames that free memory as they unwind (left to the simulation without reuse).
 */
import { afterAll, describe, expect, it, vi } from 'vitest';
import { CachingAllocator, OutOfMemoryError } from '../../../engine/allocator/caching-allocator.ts';
import { parseAllocatorConf } from '../../../engine/allocator/config.ts';
import { SimulatedDevice } from '../../../engine/allocator/device-memory.ts';
import { Autograd, Parameter } from '../../../engine/autograd/engine.ts';
import { runBlocks } from '../../../engine/models/checkpointing.ts';
import { CudaDevice } from '../../../engine/tensor/cuda.ts';
import type { Tensor } from '../../../engine/tensor/tensor.ts';
import { BlockKindPass, BlocksNotReusable, ReplayedBlock, blockReuseCounts } from '../../../engine/models/block-reuse.ts';
import { parsePlan } from '../../../engine/plan/parse.ts';
import type { Plan } from '../../../engine/plan/schema.ts';
import { simulate } from '../../../engine/train/simulate.ts';
import { forgetRecordedRuns } from '../../../engine/train/run-replay.ts';
import { planGpu } from '../../../cli/gpus.ts';
import { loadSuite } from '../../../bench/boundary-suite.ts';
import { calibrationRuns, simulatedPlan } from '../train/calibration-plans.ts';

/** Every event of the timeline. */
const kAllEvents = 2 ** 31;

const forwards = vi.spyOn(BlockKindPass.prototype, 'replayForward');
const backwards = vi.spyOn(ReplayedBlock.prototype, 'apply');

let plansReused = 0;
let plansReusedWithDetails = 0;
let oomInReplayedForward = 0;
let oomInReplayedBackward = 0;
let notReusable = 0;
/** Out of memory in a replayed block where its code had frames open that free memory as they unwind. */
let oomUnwinding = 0;

/** The plan simulated without and with reuse (as a trial runs it, or with peak details); the results must be equal. */
function compare(plan: Plan, peakDetails = false): { reused: boolean; fits: boolean } {
  const device = planGpu(plan);
  const options = { device, timelinePoints: kAllEvents, peakDetails, neededOnOom: false } as const;
  const calls = forwards.mock.calls.length;
  const backwardCalls = backwards.mock.calls.length;
  const full = simulate(plan, { ...options, reuseBlocks: false });
  expect(forwards.mock.calls.length).toBe(calls);
  const before = blockReuseCounts.notReusable;
  forgetRecordedRuns(); // the blocks replayed, not the whole run recorded just now (Note [Replayed runs])
  const reused = simulate(plan, { ...options, reuseBlocks: true });
  expect(reused).toEqual(full);
  const results = forwards.mock.results.slice(calls);
  const throws = (r: { type: string; value: unknown }, kind: new (...args: never[]) => unknown) => r.type === 'throw' && r.value instanceof kind;
  if (results.some((r) => throws(r, OutOfMemoryError))) oomInReplayedForward++;
  const backwardResults = backwards.mock.results.slice(backwardCalls);
  if (backwardResults.some((r) => throws(r, OutOfMemoryError))) oomInReplayedBackward++;
  if ([...results, ...backwardResults].some((r) => throws(r, BlocksNotReusable))) oomUnwinding++;
  notReusable += blockReuseCounts.notReusable - before;
  return { reused: results.length > 0, fits: full.oom === null };
}

/**
 * The plan with `layers` decoder layers (a pasted config's num_hidden_layers, GPT-2's n_layer; per-layer lists
 * repeated; freeze patterns naming a layer past the new depth dropped); a preset or a torchvision model as it is
 * (its published depth).
 */
function deeper(plan: Plan, layers: number): Plan | null {
  const m = plan.model;
  if ('preset' in m || 'torchvision' in m) return plan;
  if (!('hf_config' in m)) return null;
  const key = m.hf_config.model_type === 'gpt2' ? 'n_layer' : 'num_hidden_layers';
  const cfg: Record<string, unknown> = { ...m.hf_config, [key]: layers };
  const old = m.hf_config[key];
  for (const [key, value] of Object.entries(cfg)) {
    if (Array.isArray(value) && value.length === old) cfg[key] = Array.from({ length: layers }, (_, i) => value[i % value.length]);
  }
  const freeze = plan.training.freeze?.filter((pattern) => {
    const layer = /^model\.layers\.(\d+)\./.exec(pattern);
    return !layer || Number(layer[1]) < layers;
  });
  return parsePlan({ ...plan, model: { ...m, hf_config: cfg }, training: { ...plan.training, freeze } });
}

describe('reused blocks give the simulation that runs every block, field for field', () => {
  for (const { name, m } of calibrationRuns) {
    it(`calibration: ${name}, 11 layers deep, with peak details and without`, () => {
      const simulated = simulatedPlan(m);
      const plan = simulated && deeper(simulated, 11);
      if (!plan) return;
      if (compare(plan).reused) plansReused++;
      if (compare(plan, true).reused) plansReusedWithDetails++;
    }, 60_000);
  }

  for (const c of loadSuite()) {
    it(`boundary suite: ${c.name} at its largest batch and the 3 above`, () => {
      const plan = parsePlan({ ...c.plan, training: { ...c.plan.training, steps: c.steps_per_trial } });
      for (let batch = c.largest_fresh; batch <= c.largest_fresh + 3; batch++) {
        if (compare({ ...plan, training: { ...plan.training, batch_size: batch } }).reused) plansReused++;
      }
    }, 60_000);
  }
});

describe('out of memory inside replayed blocks', () => {
  // Caps from 30% to 100% of the uncapped peak reserved, in 1% steps: the error lands in step 1's forward or
  // backward, in a block that ran its code or in one replayed.
  const wide = { model_type: 'llama', hidden_size: 2048, intermediate_size: 8192, num_hidden_layers: 12, num_attention_heads: 16, num_key_value_heads: 16, vocab_size: 1024, max_position_embeddings: 4096 };
  const cases = [
    // weights far above activations: the gradients made layer by layer run out in the replayed backwards
    { label: 'a wide Llama, 12 layers, bf16, non-reentrant checkpointing', config: wide, training: { batch_size: 1, seq_len: 128, precision: 'bf16', activation_checkpointing: true } },
    { label: 'the same with reentrant checkpointing (a backward inside the block node)', config: wide, training: { batch_size: 1, seq_len: 128, precision: 'bf16', activation_checkpointing: 'reentrant' } },
    // activations far above weights: the forward runs out, in replayed blocks
    { label: 'Qwen3, 8 layers, fp32, no checkpointing, no KV cache', config: { model_type: 'qwen3', hidden_size: 512, intermediate_size: 1536, num_hidden_layers: 8, num_attention_heads: 8, num_key_value_heads: 4, head_dim: 64, vocab_size: 32000, max_position_embeddings: 4096, use_cache: false }, training: { batch_size: 8, seq_len: 512, precision: 'fp32' } },
    // its MoE block's Python frames free their locals on an exception: left to the simulation without reuse
    { label: 'Mixtral, 12 layers, bf16, no KV cache', config: { model_type: 'mixtral', hidden_size: 512, intermediate_size: 1024, num_hidden_layers: 12, num_attention_heads: 8, num_key_value_heads: 4, num_local_experts: 4, num_experts_per_tok: 2, vocab_size: 32000, max_position_embeddings: 4096, use_cache: false }, training: { batch_size: 4, seq_len: 512, precision: 'bf16' } },
  ];
  for (const c of cases) {
    it(c.label, () => {
      const base = parsePlan({ format: 'memplan.plan', version: 1, name: c.label, model: { hf_config: c.config }, training: { ...c.training, optimizer: 'adamw' }, gpu: { name: 'h100-sxm' } });
      const peak = simulate(base, { device: planGpu(base), timelinePoints: 0, peakDetails: false }).peak_reserved_bytes;
      let reused = 0;
      let failed = 0;
      for (let f = 0.3; f <= 1.0001; f += 0.01) {
        const r = compare({ ...base, gpu: { memory_limit_bytes: Math.floor(f * peak) } });
        if (r.reused) reused++;
        if (!r.fits) failed++;
      }
      expect(reused).toBeGreaterThan(50);
      expect(failed).toBeGreaterThan(20);
    }, 120_000);
  }
});

afterAll(() => {
  console.log(`reused: ${plansReused} plans (${plansReusedWithDetails} with peak details); out of memory in replayed forwards ${oomInReplayedForward}, backwards ${oomInReplayedBackward}, inside unwinding frames ${oomUnwinding}; not reusable ${notReusable} (${JSON.stringify([...blockReuseCounts.reasons])})`);
  // the comparison proves something only where blocks were replayed, out-of-memory errors in them included
  expect(plansReused).toBeGreaterThan(100);
  expect(plansReusedWithDetails).toBeGreaterThan(50);
  expect(oomInReplayedForward).toBeGreaterThan(0);
  expect(oomInReplayedBackward).toBeGreaterThan(0);
  expect(oomUnwinding).toBeGreaterThan(0);
  expect(notReusable).toBe(oomUnwinding);
});

describe('layers that are not all the same', () => {
  const small = { model_type: 'llama', hidden_size: 256, intermediate_size: 688, num_hidden_layers: 7, num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 4096, max_position_embeddings: 2048 };
  const plan = (training: Record<string, unknown>) => parsePlan({ format: 'memplan.plan', version: 1, name: 'layers', model: { hf_config: small }, training: { batch_size: 2, seq_len: 256, precision: 'bf16', ...training }, gpu: { name: 'h100-sxm' } });
  const lora = (targets: string[]) => ({ r: 8, alpha: 16, dropout: 0, target_modules: targets });
  // a layer whose weights train otherwise (frozen, or another LoRA adapter) records another graph: its weights' key
  // differs (BlockPasses.of), and no layer is replayed
  it.each([
    ['layers 1 and 5 frozen (the recorded ones)', { freeze: ['model.layers.1.*', 'model.layers.5.*'] }],
    ['layer 3 frozen (a middle one), checkpointing', { freeze: ['model.layers.3.*'], activation_checkpointing: true }],
    ["LoRA on q_proj and layer 3's v_proj", { lora: lora(['q_proj', 'layers.3.self_attn.v_proj']) }],
  ])('%s: every layer runs its code', (_, training) => {
    expect(compare(plan(training)).reused).toBe(false);
  });

  it('every layer frozen by its input (a frozen embedding, reentrant checkpointing): replayed, each counted as PyTorch warns', () => {
    const p = plan({ freeze: ['model.embed_tokens.*'], activation_checkpointing: 'reentrant' });
    expect(compare(p).reused).toBe(true);
    const notes = simulate(p, { device: planGpu(p), timelinePoints: 0 }).notes;
    expect(notes).toContainEqual({ id: 'checkpoint_inputs_no_grad', blocks: 7 });
  });
});

describe('a run recorded without peak details', () => {
  it("names the replayed blocks' storages for the simulation that replays it with them (Note [Replayed runs])", () => {
    const config = { model_type: 'llama', hidden_size: 256, intermediate_size: 688, num_hidden_layers: 9, num_attention_heads: 4, num_key_value_heads: 4, vocab_size: 4096, max_position_embeddings: 2048 };
    const plan = parsePlan({ format: 'memplan.plan', version: 1, name: 'recorded', model: { hf_config: config }, training: { batch_size: 16, seq_len: 512, precision: 'fp32' }, gpu: { name: 'h100-sxm' } });
    const device = planGpu(plan);
    forgetRecordedRuns();
    const full = simulate(plan, { device, reuseBlocks: false, recordRun: false });
    simulate(plan, { device, peakDetails: false, timelinePoints: 0, recordRun: true });
    const replayed = simulate(plan, { device });
    expect(replayed.largest_at_peak).toEqual(full.largest_at_peak);
    expect(replayed).toEqual(full);
  });
});

describe('recordings that differ are not replayed (BlocksNotReusable)', () => {
  /**
   * Eight blocks `out = f(x, w_i)` of hand-written ops, their storages labelled `block i ...`; `extra(i, phase)`
   * adds a temporary in block i's forward or backward; `name`: the module path the reuse is told. Blocks 1 to 6 are
   * of one kind (0 and 7 have no neighbour on one side): 1, 2, 5 and 6 run their code, 3 and 4 replay.
   */
  function run(extra: (i: number, phase: 'forward' | 'backward') => boolean, name = (i: number) => `block ${i}`) {
    const allocator = new CachingAllocator({ config: parseAllocatorConf('', 'conf'), device: new SimulatedDevice(80 * 2 ** 30), totalGlobalMemBytes: 80 * 2 ** 30, nonPyTorchBytes: 0 });
    const cuda = new CudaDevice(allocator, { cublasBytes: 0, cublasLtBytes: 0 }, { multiProcessorCount: 132, maxThreadsPerMultiProcessor: 2048 });
    const autograd = new Autograd(cuda);
    const rt = { cuda, autograd, autocast: null, reuseBlocks: true };
    const weights = Array.from({ length: 8 }, (_, i) => new Parameter(`block ${i}.w`, cuda.empty([1024], 'float32', `block ${i}.w`, 'parameter'), cuda).tensor);
    const block = (x: Tensor, i: number) => {
      if (extra(i, 'forward')) cuda.release(cuda.empty([4096], 'float32', `block ${i} extra`));
      const saved = autograd.saveInputs(true, [x, weights[i]!]);
      const out = cuda.empty(x.shape, x.dtype, `block ${i} out`);
      autograd.record('MulBackward0', [x, weights[i]!], [out], saved, () => {
        if (extra(i, 'backward')) cuda.release(cuda.empty([4096], 'float32', `block ${i} backward extra`));
        return [cuda.empty(x.shape, x.dtype, `block ${i} grad x`), cuda.empty([1024], 'float32', `block ${i} grad w`)];
      });
      return out;
    };
    const input = cuda.empty([1024], 'float32', 'input');
    const reuse = { kind: () => 'block', name, weights: (i: number) => [weights[i]!] };
    const out = runBlocks(rt, input, 8, false, block, [], reuse);
    const grad = cuda.empty([1024], 'float32', 'ones');
    autograd.backward(out, grad);
    return weights.map((w) => w.leaf!.grad !== null);
  }

  it('the same blocks replay: blocks 3 and 4, every weight gets its gradient', () => {
    const before = blockReuseCounts.replayedForwards;
    expect(run(() => false)).toEqual(Array(8).fill(true));
    expect(blockReuseCounts.replayedForwards - before).toBe(2);
  });

  it("block 5's forward differs from block 2's (the template): refused at once", () => {
    expect(() => run((i, phase) => i === 5 && phase === 'forward')).toThrow(/block 5's forward differs from block 2's/);
  });

  it("block 2's backward differs from block 5's (the template): refused when it ends", () => {
    expect(() => run((i, phase) => i === 2 && phase === 'backward')).toThrow(/block 2's backward differs from the replayed one/);
  });

  it('labels that name the block otherwise than its module path: refused (a replay could not name its storages)', () => {
    expect(() => run(() => false, (i) => `layer ${i}`)).toThrow(/block 5's forward differs from block 2's/);
  });
});
