/**
 * Presets build the real architectures: their parameter counts are the published ones (torchvision's weight
 * tables, the Hugging Face models' safetensors totals), every preset simulates, and a pasted config.json's
 * mistakes name their field.
 */
import { describe, expect, it } from 'vitest';
import { InputError } from '../../../engine/errors.ts';
import { PRESETS, PRESET_NAMES } from '../../../engine/models/presets.ts';
import { parsePlan } from '../../../engine/plan/parse.ts';
import { simulate } from '../../../engine/train/simulate.ts';
import { planGpu } from '../../../cli/gpus.ts';
import { HF_MODEL_TYPES, safeParseHfConfig } from '../../../engine/index.ts';

const PUBLISHED: Record<string, number> = {
  gpt2: 124_439_808,
  'gpt2-medium': 354_823_168,
  'gpt2-large': 774_030_080,
  'gpt2-xl': 1_557_611_200,
  'tinyllama-1.1b': 1_100_048_384,
  'llama-2-7b': 6_738_415_616,
  'llama-3-8b': 8_030_261_248,
  'mistral-7b': 7_248_023_552,
  'qwen2.5-0.5b': 494_032_768,
  // Qwen3 model cards: 0.6B (0.44B without embeddings), 1.7B, 4.0B, 8.2B, 14.8B, 32.8B; a tied lm_head counts once,
  // as model.parameters() lists it
  'qwen3-0.6b': 596_049_920,
  'qwen3-1.7b': 1_720_574_976,
  'qwen3-4b': 4_022_468_096,
  'qwen3-8b': 8_190_735_360,
  'qwen3-14b': 14_768_307_200,
  'qwen3-32b': 32_762_123_264,
  // Phi-3 and Phi-4-mini safetensors totals
  'phi-3-mini-4k': 3_821_079_552,
  'phi-3-medium-4k': 13_960_238_080,
  'phi-4-mini': 3_836_021_760,
  // Gemma 2: the safetensors totals of google/gemma-2-2b, -9b, -27b (tied lm_head counted once)
  'gemma-2-2b': 2_614_341_888,
  'gemma-2-9b': 9_241_705_984,
  'gemma-2-27b': 27_227_128_320,
  // Gemma 3: google/gemma-3-1b-pt's total; for the multimodal 4B/12B/27B, Gemma3ForCausalLM on their text_config:
  // the technical report's non-embedding counts (3,209M, 10,759M, 25,600M; ours 3,209,010,688, 10,759,155,456,
  // 25,599,716,096) plus vocab x hidden (262,208 tokens; the report's embedding figures, 675M/1,012M/1,416M, are
  // 0.4-0.6% larger than 262,208 x hidden and their split is not published)
  'gemma-3-1b': 999_885_952,
  'gemma-3-4b': 3_880_263_168,
  'gemma-3-12b': 11_766_034_176,
  'gemma-3-27b': 27_009_346_304,
  // Mixtral: the published totals (46.7B, 141B; a 3-D expert weight counts its experts' parameters)
  'mixtral-8x7b': 46_702_792_704,
  'mixtral-8x22b': 140_630_071_296,
  resnet18: 11_689_512,
  resnet34: 21_797_672,
  resnet50: 25_557_032,
  resnet101: 44_549_160,
  resnet152: 60_192_808,
  vit_b_16: 86_567_656,
  vit_l_16: 304_326_632,
};

const plan = (preset: string, training: Record<string, unknown> = {}) =>
  parsePlan({ format: 'memplan.plan', version: 1, model: { preset }, training: { batch_size: 1, seq_len: 128, precision: 'bf16', optimizer: 'sgd', ...training }, gpu: { memory_limit_bytes: 2 ** 41 } });

describe('presets', () => {
  for (const name of PRESET_NAMES) {
    it(`${name} (${PRESETS[name]!.family}, ${PRESETS[name]!.parameters}) simulates${PUBLISHED[name] ? ' with its published parameter count' : ''}`, () => {
      const p = plan(name, { steps: 1 });
      const r = simulate(p, { device: planGpu(p), untilSteady: false, timelinePoints: 0 });
      expect(r.oom).toBeNull();
      expect(r.peak_allocated_bytes).toBeGreaterThan(r.model.parameter_bytes);
      if (PUBLISHED[name]) expect(r.model.parameter_count).toBe(PUBLISHED[name]);
      // and with the plan's defaults (fp32: grouped-query attention then runs SDPA's math backend)
      const defaults = plan(name, { steps: 1, precision: 'fp32' });
      expect(simulate(defaults, { device: planGpu(defaults), untilSteady: false, timelinePoints: 0 }).oom).toBeNull();
    });
  }

  it('refuses a sequence longer than the model has positions, naming training.seq_len', () => {
    // found when the plan is read (engine/plan/limits.ts), before any simulation
    expect(() => plan('gpt2', { seq_len: 2048 })).toThrow(/training\.seq_len: 2048 is more than the model's 1024 positions/);
  });

  it('names the field of a pasted config.json it cannot use', () => {
    // found when the plan is read (safeParsePlan resolves the config), before any simulation
    const bad = (hf: Record<string, unknown>) => () => {
      const p = parsePlan({ format: 'memplan.plan', version: 1, model: { hf_config: hf }, training: { batch_size: 1, seq_len: 64 } });
      return simulate(p, { device: planGpu(p) });
    };
    expect(bad({ model_type: 't5' })).toThrow(/model\.hf_config\.model_type: "t5" is not simulated yet/);
    expect(bad({})).toThrow(/model\.hf_config\.model_type: is required/);
    expect(bad({ model_type: 'llama', num_attention_heads: 32, num_key_value_heads: 5 })).toThrow(/model\.hf_config\.num_key_value_heads/);
    expect(bad({ model_type: 'gpt2', n_embd: 'wide' })).toThrow(/model\.hf_config\.n_embd: must be a positive integer/);
    expect(bad({ model_type: 'gpt2', activation_function: 'gelu_fast' })).toThrow(/model\.hf_config\.activation_function/);
  });

  it('takes a config.json as the Hub ships it: missing keys get transformers defaults', () => {
    const p = parsePlan({ format: 'memplan.plan', version: 1, model: { hf_config: { model_type: 'gpt2', architectures: ['GPT2LMHeadModel'] } }, training: { batch_size: 1, seq_len: 64, steps: 1 } });
    expect(simulate(p, { device: planGpu(p), untilSteady: false }).model.parameter_count).toBe(PUBLISHED.gpt2);
  });
});

describe('max-batch on every GPU of the catalog', () => {
  it('finds a batch for GPT-2 and ResNet-50 on each GPU, more on larger GPUs', async () => {
    const { findMaxBatch } = await import('../../../engine/search/max-batch.ts');
    const { gpuCatalog, deviceFor } = await import('../../../cli/gpus.ts');
    const sizes: [number, number][] = [];
    for (const gpu of gpuCatalog().gpus) {
      const device = deviceFor(gpu);
      const lm = parsePlan({ format: 'memplan.plan', version: 1, model: { preset: 'gpt2' }, training: { batch_size: 1, seq_len: 256, precision: 'amp_bf16' }, gpu: { name: gpu.id } });
      const r = findMaxBatch(lm, { device, untilSteady: false });
      expect(r.max_batch, gpu.id).toBeGreaterThan(0);
      expect(r.trials.find((t) => t.batch === r.max_batch)!.peak_reserved_bytes).toBeLessThanOrEqual(gpu.total_memory_bytes - gpu.non_pytorch_bytes);
      // (below compute capability 8.0 bf16 attention runs the math backend, which holds the scores: compared apart)
      if (gpu.vendor === 'amd' || gpu.compute_capability[0] >= 8) sizes.push([gpu.total_memory_bytes, r.max_batch]);
      const vision = parsePlan({ format: 'memplan.plan', version: 1, model: { preset: 'resnet50' }, training: { batch_size: 1, precision: 'amp_fp16', optimizer: 'sgd_momentum' }, gpu: { name: gpu.id } });
      expect(findMaxBatch(vision, { device, untilSteady: false, maxBatch: 512 }).max_batch, gpu.id).toBeGreaterThan(0);
    }
    // more memory never means a smaller batch, among GPUs that run fused attention kernels
    expect(sizes.length).toBeGreaterThan(12);
    sizes.sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < sizes.length; i++) expect(sizes[i]![1]).toBeGreaterThanOrEqual(sizes[i - 1]![1]);
  }, 120_000);
});

describe('the model types of a pasted config.json', () => {
  it('HF_MODEL_TYPES lists exactly the model_types resolveHfConfig simulates', () => {
    for (const modelType of HF_MODEL_TYPES) {
      const parsed = safeParseHfConfig({ model_type: modelType });
      const problems = parsed.ok ? [] : parsed.issues.map((i) => i.message);
      expect(problems.filter((m) => m.includes('is not simulated yet')), modelType).toEqual([]);
    }
    const unknown = safeParseHfConfig({ model_type: 'falcon' });
    expect(unknown.ok).toBe(false);
    if (!unknown.ok) expect(unknown.issues[0]!.message).toBe(`"falcon" is not simulated yet; simulated: ${HF_MODEL_TYPES.join(', ')}`);
  });
});
