/**
 * LoRA and frozen parameters as PEFT and PyTorch run them (engine/models/peft/lora.ts). The memory itself is
 * checked against H100 recordings in test/engine/train/calibration.test.ts (lora_*, tinyllama_4l_freeze_*);
 * these tests pin the rules that decide it: which modules get adapters, where they sit in `Module._apply`
 * order, what trains, and which plans are refused.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { InputError } from '../../../engine/errors.ts';
import { replaySnapshot } from '../../../engine/snapshot/replay.ts';
import { readSnapshotBytes } from '../../../engine/snapshot/snapshot.ts';
import { isLoraTarget, matchesPattern } from '../../../engine/models/peft/lora.ts';
import { parsePlan } from '../../../engine/plan/parse.ts';
import { simulate } from '../../../engine/train/simulate.ts';
import { programKey, recordedRun } from '../../../engine/train/run-replay.ts';
import { planGpu } from '../../../cli/gpus.ts';
import { expectSameRequestsPlacedElsewhere, recording, requestsOf } from './allocations.ts';

const tinyLlama = { model_type: 'llama', hidden_size: 2048, intermediate_size: 5632, num_hidden_layers: 2, num_attention_heads: 32, num_key_value_heads: 4, vocab_size: 32000 };
const lora = { r: 16, alpha: 32, dropout: 0.05, target_modules: ['q_proj', 'v_proj'] };

function run(hf: Record<string, unknown>, training: Record<string, unknown>) {
  const plan = parsePlan({ format: 'memplan.plan', version: 1, model: { hf_config: hf }, training: { batch_size: 2, seq_len: 128, precision: 'amp_bf16', optimizer: 'adamw', steps: 2, ...training } });
  return simulate(plan, { device: planGpu(plan), untilSteady: false, timelinePoints: 0 });
}

describe('LoRA target matching (PEFT check_target_module_exists, a list of names)', () => {
  it('matches a module whose full name is a key or ends with "." + key', () => {
    expect(isLoraTarget('model.layers.0.self_attn.q_proj', ['q_proj'])).toBe(true);
    expect(isLoraTarget('lm_head', ['lm_head'])).toBe(true);
    expect(isLoraTarget('model.layers.0.self_attn.qkv_proj', ['q_proj'])).toBe(false);
    expect(isLoraTarget('model.layers.0.self_attn.q_proj', ['self_attn.q_proj'])).toBe(true);
  });
});

describe('freeze patterns (fnmatch.fnmatchcase)', () => {
  it('matches * across dots, ? one character, [...] a set, and is case-sensitive', () => {
    expect(matchesPattern('model.layers.1.mlp.up_proj.weight', 'model.layers.1.*')).toBe(true);
    expect(matchesPattern('model.layers.10.mlp.up_proj.weight', 'model.layers.1.*')).toBe(false);
    expect(matchesPattern('model.layers.3.input_layernorm.weight', 'model.layers.?.input_layernorm.weight')).toBe(true);
    expect(matchesPattern('model.layers.3.x', 'model.layers.[0-2].*')).toBe(false);
    expect(matchesPattern('model.layers.2.x', 'model.layers.[0-2].*')).toBe(true);
    expect(matchesPattern('Model.embed_tokens.weight', 'model.*')).toBe(false);
  });
});

describe('LoRA on a Llama model', () => {
  it('adds r x (in + out) fp32 parameters per target and trains only them', () => {
    const full = run(tinyLlama, {});
    const adapted = run(tinyLlama, { lora });
    // q_proj: 2048 -> 2048, v_proj: 2048 -> 256, two layers
    const adapters = 2 * (16 * (2048 + 2048) + 16 * (2048 + 256));
    expect(adapted.model.parameter_count - full.model.parameter_count).toBe(adapters);
    expect(adapted.model.parameter_bytes - full.model.parameter_bytes).toBe(adapters * 4);
    // no gradient and no AdamW state for the base: far less memory after the optimizer step
    const stateAndGrads = (r: typeof full) => r.steps[0]!.after_optimizer_step_bytes - r.steps[0]!.after_zero_grad_bytes;
    expect(stateAndGrads(adapted)).toBeLessThan(adapters * 4 * 2);
    expect(stateAndGrads(full)).toBeGreaterThan(full.model.parameter_bytes);
    expect(adapted.peak_allocated_bytes).toBeLessThan(full.peak_allocated_bytes);
  });

  it('keeps the dropout mask of the adapter path: dropout 0 (nn.Identity) saves less', () => {
    const withDropout = run(tinyLlama, { lora, precision: 'fp32' });
    const without = run(tinyLlama, { lora: { ...lora, dropout: 0 }, precision: 'fp32' });
    expect(withDropout.steps[1]!.after_forward_bytes[0]! - without.steps[1]!.after_forward_bytes[0]!).toBeGreaterThan(0);
  });

  it('freezing parameters removes their gradients and optimizer state', () => {
    const full = run(tinyLlama, {});
    const frozen = run(tinyLlama, { freeze: ['model.embed_tokens.*', 'lm_head.*'] });
    const state = (r: typeof full) => r.steps[0]!.after_zero_grad_bytes;
    // embed_tokens and lm_head: 2 x 32000 x 2048 fp32, with AdamW's exp_avg and exp_avg_sq each
    expect(state(full) - state(frozen)).toBe(2 * 32000 * 2048 * 4 * 2);
  });
});

describe('plans LoRA cannot run are refused at their field', () => {
  const refused = (hf: Record<string, unknown>, training: Record<string, unknown>, message: RegExp) => {
    expect(() => run(hf, training)).toThrow(InputError);
    expect(() => run(hf, training)).toThrow(message);
  };

  it('QLoRA: a 4-bit base needs bitsandbytes', () => {
    refused(tinyLlama, { lora: { ...lora, quantization: '4bit' } }, /training\.lora\.quantization: .*bitsandbytes/);
    expect(() => parsePlan({ format: 'memplan.plan', version: 1, model: { hf_config: { ...tinyLlama, quantization_config: { load_in_4bit: true } } }, training: { batch_size: 1 } })).toThrow(/quantization_config: .*bitsandbytes/);
    // DeepSeek-V3's published config.json ships fp8 weights; its model type is what memplan cannot plan, said first
    // (removing quantization_config would not help)
    const deepseek = { model_type: 'deepseek_v3', hidden_size: 7168, num_hidden_layers: 61, quantization_config: { quant_method: 'fp8', fmt: 'e4m3', weight_block_size: [128, 128] } };
    expect(() => parsePlan({ format: 'memplan.plan', version: 1, model: { hf_config: deepseek }, training: { batch_size: 1 } })).toThrow(/model\.hf_config\.model_type: "deepseek_v3" is not simulated yet/);
    expect(() => parsePlan({ format: 'memplan.plan', version: 1, model: { hf_config: { ...tinyLlama, quantization_config: { quant_method: 'fp8' } } }, training: { batch_size: 1 } })).toThrow(/quantization_config: quantized weights \(bitsandbytes 4-bit or 8-bit, GPTQ, AWQ, fp8\)/);
  });

  it('targets that name no Linear of the model', () => {
    refused(tinyLlama, { lora: { ...lora, target_modules: ['qkv_proj'] } }, /training\.lora\.target_modules: no nn\.Linear of this model is named "qkv_proj"; its nn\.Linear modules are named q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, lm_head$/);
  });

  it('LoRA on a torchvision model or a layer list: simulated for Hugging Face models only, freezing offered instead', () => {
    const p = parsePlan({ format: 'memplan.plan', version: 1, model: { torchvision: 'resnet18', num_classes: 10 }, training: { batch_size: 2, lora: { ...lora, target_modules: ['fc'] } } });
    expect(() => simulate(p, { device: planGpu(p), untilSteady: false })).toThrow(/^training\.lora: LoRA is simulated for the Hugging Face model types gpt2, .*, xlm-roberta; to train part of this model, freeze the rest \(training\.freeze\)$/);
  });

  it("BERT's modules: a target naming none of them lists query, key, value and dense (the tied decoder is not adapted)", () => {
    refused({ model_type: 'bert', num_hidden_layers: 2 }, { lora: { ...lora, target_modules: ['q_proj', 'c_attn'] } }, /^training\.lora\.target_modules: no nn\.Linear of this model is named "q_proj" or "c_attn"; its nn\.Linear modules are named query, key, value, dense$/);
    refused({ model_type: 'bert', num_hidden_layers: 2 }, { lora: { ...lora, target_modules: ['q_proj', 'decoder'] } }, /^training\.lora\.target_modules: "decoder" names cls\.predictions\.decoder, on which memplan does not simulate an adapter \(it simulates LoRA on the nn\.Linear modules named query, key, value, dense\): leave it out of target_modules$/);
  });

  it("GPT-2's modules are Conv1D: a target naming none of them lists c_attn, c_proj and c_fc", () => {
    refused({ model_type: 'gpt2', n_layer: 2 }, { lora: { ...lora, target_modules: ['q_proj'] } }, /^training\.lora\.target_modules: no Conv1D of this model is named "q_proj"; its Conv1D modules are named c_attn, c_proj, c_fc$/);
  });

  it('a freeze pattern that matches nothing (a typo would train everything)', () => {
    refused(tinyLlama, { freeze: ['model.layer.0.*'] }, /training\.freeze: the pattern "model\.layer\.0\.\*" matches no parameter/);
  });
});

describe('LoRA on Gemma 2, Gemma 3, Mixtral, GPT-2, Qwen3-MoE and BERT (the H100 recordings lora_gemma*, lora_mixtral*, lora_gpt2*, lora_qwen3moe*, lora_bert*)', () => {
  const recordings = [
    'lora_gemma2_4l_amp_bf16_ckpt',
    'lora_gemma3_6l_bf16_adamw_s1024',
    'lora_mixtral_4l_bf16_sgdm_s1024',
    'lora_mixtral_4l_bf16_adamw_s512_ckpt',
    // GPT-2's Conv1D modules, wrapped by PEFT as nn.Linear: c_attn alone (PEFT's default), c_attn and c_proj, all
    'lora_gpt2_small_bf16_c_attn_adamw',
    'lora_gpt2_medium_amp_fp16_c_attn_c_proj',
    'lora_gpt2_small_amp_bf16_all_ckpt',
    'lora_gpt2_small_fp32_reentrant_sgdm',
    // Qwen3-MoE: q/v adapters, the experts (3-D parameters) frozen
    'lora_qwen3moe_4l_bf16_qv_ckpt_s512',
    // BERT: query and value (PEFT's default for bert), every Linear of the encoder and the head's transform
    'lora_bert_base_amp_bf16_qv_ckpt',
    'lora_bert_base_fp32_all_adamw',
    'lora_bert_large_bf16_qv_reentrant_sgdm',
    // a BERT sequence classifier: the adapters, and the classifier's modules_to_save copy (PEFT's SEQ_CLS task)
    'lora_bert_base_cls_bf16_qv_adamw',
    'lora_bert_base_cls_amp_fp16_all_reentrant',
    // decoder classifiers: the adapters and the score's copy
    'lora_qwen3_4l_cls_bf16_qv_adamw',
    'lora_llama_4l_cls_amp_fp16_all_reentrant',
    // XLM-RoBERTa's classifier: adapters on query, value and the encoder's dense modules, the head's copy
    'lora_xlm_roberta_base_cls_amp_bf16_qvd_ckpt',
    'lora_gemma3_6l_cls_bf16_qv',
    'lora_mixtral_4l_cls_bf16_qv',
  ];
  for (const name of recordings) {
    it(`${name}: the recording's parameters, the adapters (and a classifier's modules_to_save copy) trainable (PEFT's count), only they get state`, async () => {
      const { readFileSync } = await import('node:fs');
      const m = JSON.parse(readFileSync(new URL(`../../fixtures/calibration/${name}.json`, import.meta.url), 'utf8')) as {
        plan: { training: Record<string, unknown> } & Record<string, unknown>;
        model: { parameter_count: number; trainable_parameter_count: number };
      };
      const plan = parsePlan(m.plan);
      const { lora: _lora, ...full } = m.plan.training;
      const device = planGpu(plan);
      const adapted = simulate(plan, { device, untilSteady: false, timelinePoints: 0 });
      const base = simulate(parsePlan({ ...m.plan, training: full }), { device, untilSteady: false, timelinePoints: 0 });
      expect(adapted.model.parameter_count).toBe(m.model.parameter_count);
      expect(adapted.model.parameter_count - base.model.parameter_count).toBe(m.model.trainable_parameter_count);
      // fp32 adapters: their gradients and AdamW's two states are all the optimizer step leaves beyond zero_grad
      const afterStep = (r: typeof adapted) => r.steps[0]!.after_optimizer_step_bytes - r.steps[0]!.after_zero_grad_bytes;
      expect(afterStep(adapted)).toBeLessThanOrEqual(m.model.trainable_parameter_count * 4 * 3 + 2 ** 22);
      expect(afterStep(base)).toBeGreaterThanOrEqual(base.model.parameter_bytes); // the base's gradients
    });
  }

  it('Mixtral with frozen experts: the grouped GEMMs save no input for a weight gradient; both peaks the recordings\' to the byte', async () => {
    const { readFileSync } = await import('node:fs');
    for (const name of ['lora_mixtral_4l_bf16_sgdm_s1024', 'lora_mixtral_4l_bf16_adamw_s512_ckpt']) {
      const m = JSON.parse(readFileSync(new URL(`../../fixtures/calibration/${name}.json`, import.meta.url), 'utf8')) as { plan: unknown; peak_allocated_bytes: number; peak_reserved_bytes: number };
      const plan = parsePlan(m.plan);
      const r = simulate(plan, { device: planGpu(plan), untilSteady: false, timelinePoints: 0 });
      expect([r.peak_allocated_bytes, r.peak_reserved_bytes], name).toEqual([m.peak_allocated_bytes, m.peak_reserved_bytes]);
    }
  });
});

describe('Qwen3 8B with LoRA on q/v, loaded with from_pretrained (an H100 boundary trial at 13 under 32 GiB)', () => {
  // boundary_trials.py --pretrained: the published 8B loaded from a checkpoint as users load it, 6 steps
  const name = 'lora_qwen3_8b_bf16_qv_ckpt_s512_b13_cap32g_pretrained';
  const calibration = new URL('../../fixtures/calibration/', import.meta.url);
  const meta = JSON.parse(readFileSync(new URL(`${name}.json`, calibration), 'utf8')) as { plan: unknown; peak_allocated_bytes: number; peak_reserved_bytes: number };
  const snapshot = readSnapshotBytes(readFileSync(new URL(`${name}.pickle.gz`, calibration)));

  it("memplan asks for the same 108,000 allocations and frees; the reserved peak differs only by where segments land", () => {
    const plan = parsePlan(meta.plan);
    const events: { action: string; addr: number; size: number }[] = [];
    const r = simulate(plan, { device: planGpu(plan), untilSteady: false, timelinePoints: 0, onTrace: (action, addr, size) => events.push({ action, addr, size }) });
    const real = requestsOf(snapshot.trace);
    expect(real.length).toBeGreaterThan(100_000);
    expect(requestsOf(events).slice(0, real.length)).toEqual(real);
    expect(r.peak_allocated_bytes).toBe(meta.peak_allocated_bytes);
    // replayed with its own segments' addresses, the allocator reserves what PyTorch did
    const replay = replaySnapshot(snapshot, { allocConf: '', memoryLimitBytes: 32 * 2 ** 30 });
    expect(replay.firstMismatch).toBeNull();
    expect(replay.simPeakReservedBytes).toBe(meta.peak_reserved_bytes);
    // with the driver's placement rule, one 156 MiB block more: +0.49%, on the safe side
    expect(r.peak_reserved_bytes - meta.peak_reserved_bytes).toBe(163_577_856);
  }, 60_000);
});

describe('reentrant checkpointing whose blocks get an input that needs no gradient', () => {
  // a frozen embedding and no enable_input_require_grads(): PyTorch warns "None of the inputs have
  // requires_grad=True" and computes no gradient inside the checkpointed blocks
  const plan = (training: Record<string, unknown>) =>
    parsePlan({ format: 'memplan.plan', version: 1, model: { preset: 'tinyllama-1.1b' }, training: { batch_size: 1, seq_len: 64, precision: 'bf16', optimizer: 'sgd', ...training } });
  const run = (training: Record<string, unknown>) => {
    const p = plan(training);
    return simulate(p, { device: planGpu(p), timelinePoints: 0 });
  };

  it('is noted, block for block, and the blocks train nothing; a replayed run says the same', () => {
    const frozen = { activation_checkpointing: 'reentrant', freeze: ['model.embed_tokens.*'] };
    const r = run(frozen);
    expect(r.notes).toContainEqual({ id: 'checkpoint_inputs_no_grad', blocks: 22 });
    // no parameter of the 22 layers gets a gradient: what is trained is the final norm and lm_head
    expect(r.peak_allocated_bytes).toBeLessThan(run({ activation_checkpointing: 'non_reentrant', freeze: ['model.embed_tokens.*'] }).peak_allocated_bytes);
    // the second simulation of the program replays the first one's recording (Note [Replayed runs])
    const p = plan(frozen);
    expect(recordedRun(programKey(p, planGpu(p)))).toBeDefined();
    expect(run(frozen).notes).toEqual(r.notes);
  });

  it('is not noted where the input needs a gradient: the embedding trains, LoRA (PEFT calls enable_input_require_grads), or non-reentrant checkpointing', () => {
    const ids = (training: Record<string, unknown>) => run(training).notes.map((n) => n.id);
    expect(ids({ activation_checkpointing: 'reentrant' })).not.toContain('checkpoint_inputs_no_grad');
    expect(ids({ activation_checkpointing: 'reentrant', lora: { r: 8, alpha: 16, target_modules: ['q_proj', 'v_proj'] } })).not.toContain('checkpoint_inputs_no_grad');
    expect(ids({ activation_checkpointing: 'non_reentrant', freeze: ['model.embed_tokens.*'] })).not.toContain('checkpoint_inputs_no_grad');
  });
});

describe('LoRA target names that match a module memplan puts no adapter on', () => {
  const refusal = (preset: string, targets: string[]) => {
    const p = parsePlan({ format: 'memplan.plan', version: 1, model: { preset }, training: { batch_size: 1, seq_len: 64, precision: 'bf16', lora: { r: 8, alpha: 16, target_modules: targets } } });
    try {
      simulate(p, { device: planGpu(p), timelinePoints: 0 });
    } catch (error) {
      return error as InputError;
    }
    return null;
  };

  it('are refused at target_modules: PEFT would adapt the embedding or the tied LM head, and memplan would not', () => {
    // PEFT wraps nn.Embedding and a tied head's nn.Linear too; simulating without them would plan less than it trains
    const embedding = refusal('tinyllama-1.1b', ['q_proj', 'v_proj', 'embed_tokens']);
    expect(embedding).toBeInstanceOf(InputError);
    expect(embedding!.where).toBe('training.lora.target_modules');
    expect(embedding!.problem).toBe('"embed_tokens" names model.embed_tokens, on which memplan does not simulate an adapter (it simulates LoRA on the nn.Linear modules named q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, lm_head): leave it out of target_modules');
    // Llama 3.2 ties lm_head to embed_tokens: named_parameters() has no lm_head, the module is still there
    expect(refusal('llama-3.2-1b', ['q_proj', 'lm_head'])?.problem).toMatch(/^"lm_head" names lm_head, on which memplan does not simulate an adapter/);
    expect(refusal('gpt2', ['c_attn', 'lm_head'])?.problem).toMatch(/^"lm_head" names lm_head,/);
    expect(refusal('gpt2', ['c_attn', 'wte'])?.problem).toMatch(/^"wte" names transformer\.wte,/);
    expect(refusal('bert-base', ['query', 'word_embeddings'])?.problem).toMatch(/^"word_embeddings" names bert\.embeddings\.word_embeddings,/);
    // a norm or a block, which PEFT refuses to adapt ("Target module ... is not supported")
    expect(refusal('tinyllama-1.1b', ['q_proj', 'input_layernorm'])?.problem).toMatch(/^"input_layernorm" names model\.layers\.0\.input_layernorm,/);
    expect(refusal('tinyllama-1.1b', ['q_proj', 'self_attn'])?.problem).toMatch(/^"self_attn" names model\.layers\.0\.self_attn,/);
    // the tied head alone: the same message, not "no nn.Linear of this model is named"
    expect(refusal('llama-3.2-1b', ['lm_head'])?.problem).toMatch(/^"lm_head" names lm_head, on which memplan does not simulate an adapter/);
  });

  it('an untied LM head is an nn.Linear memplan adapts; a classifier PEFT keeps whole takes no adapter', () => {
    expect(refusal('tinyllama-1.1b', ['q_proj', 'lm_head'])).toBeNull();
    // measured on the H100 (4-layer TinyLlama, q_proj, v_proj and lm_head): the same requests in the same order over
    // 6 steps, segments placed where the freed CPU copy left room; both peaks exact
    const r = expectSameRequestsPlacedElsewhere('lora_tinyllama_4l_bf16_qv_lm_head_s512');
    const m = recording('lora_tinyllama_4l_bf16_qv_lm_head_s512');
    expect(r.peak_allocated_bytes).toBe(m.peak_allocated_bytes);
    expect(r.peak_reserved_bytes).toBe(m.peak_reserved_bytes);
    // RobertaForSequenceClassification's classifier.dense under modules_to_save: `dense` adapts the encoder's only
    // (measured: lora_xlm_roberta_base_cls_amp_bf16_qvd_ckpt, exact event for event)
    const p = parsePlan({
      format: 'memplan.plan',
      version: 1,
      model: { hf_config: { model_type: 'roberta', architectures: ['RobertaForSequenceClassification'], num_hidden_layers: 2, hidden_size: 64, num_attention_heads: 4, intermediate_size: 128, vocab_size: 1000 } },
      training: { batch_size: 1, seq_len: 64, precision: 'bf16', lora: { r: 8, alpha: 16, target_modules: ['query', 'value', 'dense'] } },
    });
    expect(simulate(p, { device: planGpu(p), timelinePoints: 0 }).notes.map((n) => n.id)).not.toContain('lora_targets_unmatched');
    // the head itself named: no adapter, and no note that no module has the name
    const score = parsePlan({ ...p, training: { ...p.training, lora: { ...p.training.lora!, target_modules: ['query', 'value', 'classifier'] } } });
    expect(simulate(score, { device: planGpu(score), timelinePoints: 0 }).notes.map((n) => n.id)).not.toContain('lora_targets_unmatched');
  });
});

describe('LoRA target names that match no module while others do', () => {
  const run = (targets: string[]) => {
    const p = parsePlan({ format: 'memplan.plan', version: 1, model: { preset: 'tinyllama-1.1b' }, training: { batch_size: 1, seq_len: 64, precision: 'bf16', lora: { r: 8, alpha: 16, target_modules: targets } } });
    return simulate(p, { device: planGpu(p), timelinePoints: 0 });
  };

  it('are noted (PEFT adapts the modules the others match and says nothing)', () => {
    expect(run(['q_proj', 'c_attn', 'v_proj', 'w1']).notes).toContainEqual({ id: 'lora_targets_unmatched', targets: ['c_attn', 'w1'] });
    expect(run(['q_proj', 'v_proj']).notes.map((n) => n.id)).not.toContain('lora_targets_unmatched');
    // a full module path matches as PEFT matches it
    expect(run(['model.layers.0.self_attn.q_proj', 'v_proj']).notes.map((n) => n.id)).not.toContain('lora_targets_unmatched');
  });
});
