/** Advice: every variant is a real simulation of the changed plan; only changes that help are listed, the rest say why not. */
import { describe, expect, it } from 'vitest';
import { planGpu } from '../../../cli/gpus.ts';
import { ADVICE_IDS, adviceResultSchema, advise, adviseSteps, findMaxBatch, loraConfigCode, parsePlan, planVariants, setUpAdvice, simulate, type Plan, type VariantOptions } from '../../../engine/index.ts';

const plan = parsePlan({
  format: 'memplan.plan',
  version: 1,
  model: {
    input_features: 1024,
    layers: [
      { type: 'linear', in_features: 1024, out_features: 4096 },
      { type: 'repeat', count: 4, layers: [{ type: 'residual', layers: [{ type: 'layer_norm', normalized_shape: 4096 }, { type: 'linear', in_features: 4096, out_features: 4096 }, { type: 'gelu' }] }] },
      { type: 'linear', in_features: 4096, out_features: 1000 },
    ],
  },
  training: { batch_size: 8192, precision: 'fp32', optimizer: 'adamw' },
});
const device = planGpu(plan);

/** GPT-2 medium in fp32 at 8 x 1024 under a cap of `gib` GiB, which it does not fit (it needs 32 GiB), simulated. */
function gpt2MediumUnder(gib: number) {
  const oom = parsePlan({ format: 'memplan.plan', version: 1, model: { preset: 'gpt2-medium' }, training: { batch_size: 8, seq_len: 1024, precision: 'fp32' }, gpu: { memory_limit_bytes: gib * 2 ** 30 } });
  const d = planGpu(oom);
  const own = simulate(oom, { device: d, timelinePoints: 0 });
  expect(own.fits).toBe(false);
  return { oom, d, own };
}

describe('advice', () => {
  it('offers the changes that apply to the plan, each a changed copy of it', () => {
    const ids = planVariants(plan).variants.map((v) => v.id);
    expect(ids).toEqual(['amp_bf16', 'checkpointing', 'fused_optimizer', 'accumulation', 'expandable_segments']);
    const accumulation = planVariants(plan).variants.find((v) => v.id === 'accumulation')!;
    expect(accumulation.plan.training.batch_size * accumulation.plan.training.grad_accumulation_steps).toBe(8192);
    expect(plan.training.batch_size).toBe(8192); // the plan itself is untouched
  });

  it('does not offer expandable segments to a plan whose odd large_segment_size_mb makes PyTorch fail with them', () => {
    const odd = parsePlan({ ...plan, allocator: { conf: 'large_segment_size_mb:11' } });
    const { variants, not_applicable } = planVariants(odd);
    expect(variants.map((v) => v.id)).not.toContain('expandable_segments');
    const skipped = not_applicable.find((n) => n.id === 'expandable_segments')!;
    expect(skipped.reason_id).toBe('fails_in_pytorch');
    expect(skipped.message).toMatch(/^large_segment_size_mb 11 with expandable_segments:True fails in PyTorch/);
    const even = planVariants(parsePlan({ ...plan, allocator: { conf: 'large_segment_size_mb:12' } })).variants.find((v) => v.id === 'expandable_segments')!;
    expect(even.plan.allocator.conf).toBe('large_segment_size_mb:12,expandable_segments:True');
  });

  it('reports each variant as its own simulation and ranks them by memory saved', () => {
    const result = advise(plan, { device });
    expect(adviceResultSchema.parse(result)).toEqual(result);
    const base = simulate(plan, { device }).peak_reserved_bytes;
    for (const a of result.advice) {
      const v = planVariants(plan).variants.find((x) => x.id === a.id)!;
      expect(a.peak_reserved_bytes).toBe(simulate(v.plan, { device }).peak_reserved_bytes);
      expect(a.saved_bytes).toBe(base - a.peak_reserved_bytes);
    }
    const saved = result.advice.map((a) => a.saved_bytes);
    expect(saved).toEqual([...saved].sort((x, y) => y - x));
    // At a batch of 8192 activations dominate: checkpointing and halving the micro-batch both save memory.
    expect(result.advice.find((a) => a.id === 'checkpointing')!.saved_bytes).toBeGreaterThan(0);
    expect(result.advice.find((a) => a.id === 'accumulation')!.saved_bytes).toBeGreaterThan(0);
  });

  it('lists only changes that save memory, and says why every other change is not advised', () => {
    const result = advise(plan, { device });
    for (const a of result.advice) expect(a.saved_bytes).toBeGreaterThan(0);
    const said = [...result.advice.map((a) => a.id), ...result.not_applicable.map((n) => n.id)].sort();
    expect(said).toEqual([...ADVICE_IDS].sort()); // every change is either advised or explained
    for (const n of result.not_applicable) if (n.reason_id === 'saves_nothing') expect(n.saved_bytes).toBe(0);
    expect(result.not_applicable.find((n) => n.id === 'sdpa')!.reason_id).toBe('already_set');
  });

  it('does not advise micro-batch 1 for a plan that costs memory with it (Llama 3 8B, issue 13)', () => {
    const llama = parsePlan({ format: 'memplan.plan', version: 1, model: { preset: 'llama-3-8b' }, training: { batch_size: 2, seq_len: 1024, precision: 'bf16', optimizer: 'adamw', activation_checkpointing: true } });
    const result = advise(llama, { device: planGpu(llama) });
    for (const a of result.advice) expect(a.saved_bytes).toBeGreaterThan(0);
    const accumulation = [...result.advice, ...result.not_applicable].find((x) => x.id === 'accumulation')!;
    if ('reason_id' in accumulation) expect(['saves_nothing', 'uses_more_memory']).toContain(accumulation.reason_id);
  });

  it('streams variant by variant, then returns the ranked advice', () => {
    const steps = adviseSteps(plan, { device });
    const seen: string[] = [];
    let next = steps.next();
    while (!next.done) {
      seen.push(next.value.type === 'advice' ? next.value.advice.id : next.value.not_applicable.id);
      next = steps.next();
    }
    expect(seen.sort()).toEqual([...ADVICE_IDS].sort());
    expect(next.value.advice.length).toBeGreaterThan(0);
  });

  it('for a plan that does not fit, measures each change by what it needs with no cap, not by the peak reached before the error', () => {
    // GPT-2 medium in fp32 at 8 x 1024 under 6 GiB: every variant runs out too; the peaks reached before the error
    // sit near the cap whatever the change does (Note [Advice for a plan that does not fit])
    const { oom, d, own } = gpt2MediumUnder(6);
    const result = advise(oom, { device: d });
    expect(result.base_peak_reserved_bytes).toBe(own.needed_bytes);
    const needed = (p: Plan) => {
      const r = simulate(p, { device: d, timelinePoints: 0 });
      return r.fits ? r.peak_reserved_bytes : r.needed_bytes!;
    };
    for (const a of result.advice) {
      const v = setUpAdvice(oom, { device: d }).variants.find((x) => x.id === a.id)!;
      expect(a.peak_reserved_bytes, a.id).toBe(needed(v.plan));
      expect(a.saved_bytes, a.id).toBe(own.needed_bytes! - a.peak_reserved_bytes);
    }
    // checkpointing keeps a block's input instead of its activations: gigabytes less, not the noise of peaks at the cap
    const checkpointing = result.advice.find((a) => a.id === 'checkpointing')!;
    expect(checkpointing.saved_bytes).toBeGreaterThan(2 * 2 ** 30);
    expect(result.advice.find((a) => a.id === 'amp_bf16')!.saved_bytes).toBeGreaterThan(2 ** 30);
    // the answer the command gives passes the same base (its needed_bytes)
    expect(advise(oom, { device: d, basePeakReservedBytes: own.needed_bytes!, baseFits: false })).toEqual(result);
  });

  it('for a plan that does not fit, a change that fits is measured by its peak under the cap and ranked first', () => {
    // under 12 GiB GPT-2 medium needs 32 GiB; with checkpointing it fits, the other changes still run out
    const { oom, d, own } = gpt2MediumUnder(12);
    const result = advise(oom, { device: d });
    const [first, ...rest] = result.advice;
    expect(first).toMatchObject({ id: 'checkpointing', fits: true });
    const fitting = setUpAdvice(oom, { device: d }).variants.find((v) => v.id === 'checkpointing')!;
    expect(first!.peak_reserved_bytes).toBe(simulate(fitting.plan, { device: d, timelinePoints: 0 }).peak_reserved_bytes);
    expect(first!.saved_bytes).toBe(own.needed_bytes! - first!.peak_reserved_bytes);
    expect(rest.length).toBeGreaterThan(2);
    for (const a of rest) expect(a.fits, a.id).toBe(false);
  });

  it('after a search, the accumulation change reports the peaks of the micro-batch it advises, not of the one that ran out', () => {
    // Under 2 and 8 GiB the plan's largest micro-batch with two accumulation steps runs out (gradients held across
    // micro-steps): the change advised is a smaller micro-batch, and its peaks are that one's.
    for (const cap of [2, 8].map((g) => g * 2 ** 30)) {
      const capped = { ...plan, gpu: { memory_limit_bytes: cap } };
      const search = findMaxBatch(capped, { device });
      const result = advise(capped, { device, goal: 'batch', maxBatch: search });
      const a = result.advice.find((x) => x.id === 'accumulation');
      if (a?.id !== 'accumulation') throw new Error(`no accumulation advice under ${cap} B`);
      expect(a.micro_batch).toBeLessThan(search.max_batch);
      const at = simulate({ ...capped, training: { ...capped.training, batch_size: a.micro_batch, grad_accumulation_steps: a.steps } }, { device, timelinePoints: 0 });
      expect(a.peak_reserved_bytes).toBe(at.peak_reserved_bytes);
      expect(a.fits).toBe(at.oom === null);
    }
  });

  it('after a search, advises what fits a larger effective batch, with numbers that agree with the search (issue 13)', () => {
    const capped = { ...plan, gpu: { memory_limit_bytes: 8 * 2 ** 30 } };
    const search = findMaxBatch(capped, { device });
    const result = advise(capped, { device, goal: 'batch', maxBatch: search });
    expect(result.base_max_effective_batch).toBe(search.effective_batch);
    const accumulation = result.advice.find((a) => a.id === 'accumulation');
    expect(accumulation).toBeDefined();
    if (accumulation?.id === 'accumulation') {
      // Gradients held across micro-steps can lower the largest micro-batch a little: never above the plan's.
      expect(accumulation.micro_batch).toBeLessThanOrEqual(search.max_batch);
      expect(accumulation.effective_batch).toBe(accumulation.micro_batch * accumulation.steps);
      expect(accumulation.plan_effective_batch).toBe(search.effective_batch);
      expect(accumulation.max_effective_batch).toBe(accumulation.effective_batch);
    }
    for (const a of result.advice) expect(a.max_effective_batch!).toBeGreaterThan(search.effective_batch);
  });
});

describe('LoRA advice (issue 14, Note [LoRA advice])', () => {
  const llama = (training: Record<string, unknown>, gpu = 'rtx-4090') =>
    parsePlan({ format: 'memplan.plan', version: 1, model: { preset: 'llama-3-8b' }, training: { batch_size: 1, seq_len: 1024, precision: 'bf16', optimizer: 'adamw', ...training }, gpu: { name: gpu } });

  it("advises PEFT's defaults for a full fine-tune that does not fit, simulated as the plan with training.lora", () => {
    const p = llama({});
    const d = planGpu(p);
    expect(simulate(p, { device: d, timelinePoints: 0 }).fits).toBe(false);
    const result = advise(p, { device: d });
    const lora = result.advice.find((a) => a.id === 'lora');
    expect(lora).toMatchObject({ id: 'lora', r: 8, alpha: 8, target_modules: ['q_proj', 'v_proj'], fits: true });
    const withLora = parsePlan({ ...p, training: { ...p.training, lora: { r: 8, alpha: 8, target_modules: ['q_proj', 'v_proj'] } } });
    expect(lora!.peak_reserved_bytes).toBe(simulate(withLora, { device: d, timelinePoints: 0 }).peak_reserved_bytes);
    // ranked first: the only change that fits
    expect(result.advice[0]!.id).toBe('lora');
    expect(adviceResultSchema.parse(result)).toEqual(result);
  });

  it('is not advised for a plan that fits, nor when the plan trains adapters or frozen parameters already', () => {
    const fits = llama({}, 'h200');
    expect(advise(fits, { device: planGpu(fits) }).not_applicable.find((n) => n.id === 'lora')).toEqual({ id: 'lora', reason_id: 'plan_fits' });
    for (const training of [{ lora: { r: 16, alpha: 32, target_modules: ['q_proj'] } }, { freeze: ['model.embed_tokens.*'] }]) {
      const p = llama(training);
      const result = advise(p, { device: planGpu(p) });
      expect(result.advice.map((a) => a.id)).not.toContain('lora');
      expect(result.not_applicable.find((n) => n.id === 'lora')).toEqual({ id: 'lora', reason_id: 'already_set' });
    }
    // a layer list: no model PEFT has defaults for
    const n = advise(plan, { device }).not_applicable.find((x) => x.id === 'lora')!;
    expect(n.reason_id).toBe('no_default_targets');
  });

  it("under the batch goal: when the plan's batch does not fit, the largest batch with adapters", () => {
    const p = llama({ batch_size: 4, seq_len: 512 }, 'a100-40gb');
    const d = planGpu(p);
    const search = findMaxBatch(p, { device: d });
    expect(search.max_batch).toBeLessThan(4);
    const lora = advise(p, { device: d, goal: 'batch', maxBatch: search }).advice.find((a) => a.id === 'lora')!;
    expect(lora.target_modules).toEqual(['q_proj', 'v_proj']);
    expect(lora.max_batch).toBeGreaterThan(search.max_batch);
  });

  it('targets the fused qkv_proj on Phi-3, which PEFT has no default for', () => {
    const p = parsePlan({ format: 'memplan.plan', version: 1, model: { preset: 'phi-3-mini-4k' }, training: { batch_size: 4, seq_len: 1024, precision: 'bf16', optimizer: 'adamw' }, gpu: { name: 'rtx-4090' } });
    const lora = advise(p, { device: planGpu(p) }).advice.find((a) => a.id === 'lora');
    expect(lora).toMatchObject({ target_modules: ['qkv_proj'] });
  });
});

describe('bf16 weights advice', () => {
  const gpt2 = (precision: 'fp32' | 'amp_bf16' | 'amp_fp16' | 'bf16') =>
    parsePlan({ format: 'memplan.plan', version: 1, model: { preset: 'gpt2' }, training: { batch_size: 8, seq_len: 512, precision, optimizer: 'adamw' }, gpu: { name: 'h100-sxm' } });

  it('for an autocast bf16 plan: the plan in bf16, simulated, saving the fp32 weights, gradients and AdamW state', () => {
    const amp = gpt2('amp_bf16');
    const result = advise(amp, { device });
    const item = result.advice.find((a) => a.id === 'bf16_weights');
    expect(item).toBeDefined();
    const bf16 = simulate(gpt2('bf16'), { device });
    expect(item!.peak_reserved_bytes).toBe(bf16.peak_reserved_bytes);
    expect(item!.saved_bytes).toBe(simulate(amp, { device }).peak_reserved_bytes - bf16.peak_reserved_bytes);
    // GPT-2's 124M parameters: 4 bytes each of weights, gradients and two AdamW moments become 2
    expect(item!.saved_bytes).toBeGreaterThan(124e6 * 4 * 2);
  });

  it('not for an fp32 plan (autocast first), nor fp16 AMP, nor a plan whose weights are half precision already', () => {
    const reason = (p: Parameters<typeof gpt2>[0]) => planVariants(gpt2(p)).not_applicable.find((n) => n.id === 'bf16_weights')?.reason_id;
    expect(reason('fp32')).toBe('needs_amp_bf16');
    expect(reason('amp_fp16')).toBe('needs_amp_bf16');
    expect(reason('bf16')).toBe('already_set');
    expect(planVariants(gpt2('fp32')).variants.map((v) => v.id)).toContain('amp_bf16');
  });

  it('neither bf16 change on a GPU without bf16 arithmetic (V100, T4), which emulates it', () => {
    const v100 = planGpu(parsePlan({ ...gpt2('fp32'), gpu: { name: 'v100-32gb' } }));
    const reasons = (p: Parameters<typeof gpt2>[0], gpu: VariantOptions['gpu']) => Object.fromEntries(planVariants(gpt2(p), { gpu }).not_applicable.map((n) => [n.id, n.reason_id]));
    expect(reasons('fp32', v100).amp_bf16).toBe('gpu_without_bf16');
    expect(reasons('amp_bf16', v100).bf16_weights).toBe('gpu_without_bf16');
    expect(reasons('fp32', v100).bf16_weights).toBe('gpu_without_bf16'); // not "autocast bf16 first": that is not advised here either
    expect(reasons('fp32', planGpu(parsePlan({ ...gpt2('fp32'), gpu: { name: 't4' } }))).amp_bf16).toBe('gpu_without_bf16');
    // on the H100 (compute capability 9.0) both are simulated; advice on the V100 lists neither and says why
    expect(reasons('fp32', device).amp_bf16).toBeUndefined();
    expect(reasons('amp_bf16', device).bf16_weights).toBeUndefined();
    const advice = advise(gpt2('fp32'), { device: v100 });
    expect(advice.advice.map((a) => a.id)).not.toContain('amp_bf16');
    expect(advice.not_applicable).toContainEqual({ id: 'amp_bf16', reason_id: 'gpu_without_bf16' });
  });

  it('says whether the model loads with from_pretrained, and whether LoRA keeps its adapters in fp32', () => {
    const params = (p: Plan) => planVariants(p).variants.find((v) => v.id === 'bf16_weights')?.params;
    expect(params(gpt2('amp_bf16'))).toEqual({ lora: false, hugging_face: true });
    expect(params(parsePlan({ ...plan, training: { ...plan.training, precision: 'amp_bf16' } }))).toEqual({ lora: false, hugging_face: false });
    const lora = parsePlan({
      format: 'memplan.plan',
      version: 1,
      model: { hf_config: { model_type: 'llama', hidden_size: 256, intermediate_size: 688, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 4, vocab_size: 4096, max_position_embeddings: 512 } },
      training: { batch_size: 4, seq_len: 256, precision: 'amp_bf16', lora: { r: 8, alpha: 16, target_modules: ['q_proj', 'v_proj'] } },
    });
    expect(params(lora)).toEqual({ lora: true, hugging_face: true });
  });
});

describe('LoRA advice for a sequence classifier', () => {
  it('says task_type="SEQ_CLS" (the classifier then trains, as in the simulated variant); CAUSAL_LM for a language model, none for a masked LM', () => {
    const tiny = { hidden_size: 256, intermediate_size: 512, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 32000, pad_token_id: 0 };
    const advised = (hf: Record<string, unknown>) => {
      const p = parsePlan({ format: 'memplan.plan', version: 1, model: { hf_config: hf }, training: { batch_size: 64, seq_len: 512, precision: 'fp32', optimizer: 'adamw' }, gpu: { memory_limit_bytes: 2 ** 30 } });
      return advise(p, { device: planGpu(p) }).advice.find((a) => a.id === 'lora');
    };
    const classifier = advised({ model_type: 'llama', architectures: ['LlamaForSequenceClassification'], ...tiny });
    expect(classifier).toMatchObject({ task_type: 'SEQ_CLS' });
    expect(loraConfigCode(classifier as never)).toBe('LoraConfig(r=8, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="SEQ_CLS")');
    expect(advised({ model_type: 'llama', ...tiny })).toMatchObject({ task_type: 'CAUSAL_LM' });
    expect(advised({ model_type: 'bert', hidden_size: 256, num_hidden_layers: 2, num_attention_heads: 4, intermediate_size: 512 })).toMatchObject({ task_type: null, target_modules: ['query', 'value'] });
  });
});
