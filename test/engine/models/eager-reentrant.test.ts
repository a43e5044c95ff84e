/**
 * Eager attention with reentrant checkpointing, recorded on the H100 over 8-10 steps (test/fixtures/calibration:
 * llama_4l_bf16_eager_reentrant_adamw, gemma2_4l_amp_bf16_eager_reentrant_adamw, lora_qwen3_4l_bf16_eager_reentrant,
 * gpt2_small_amp_bf16_eager_reentrant_sgdm). What they showed:
 * - GPT2Model passes each block its causal mask positionally, so reentrant checkpointing saves it with the hidden
 *   states (`ctx.save_for_backward`) and frees it as the first block's backward ends; Llama-family and Gemma layers
 *   get theirs by keyword, held by the closure until the next forward (ReentrantClosures).
 * - GPT-2's softmax and its cast are two statements: the scores die before `.type(value.dtype)` copies them.
 * - Under autocast, `softmax(..., dtype=float32).to(query.dtype)` is no copy: the roped query is fp32.
 * The first three are exact event for event (test/engine/train/calibration.test.ts); GPT-2's asks for the same
 * blocks in the same order, placed among segments the driver put elsewhere.
 */
import { describe, expect, it } from 'vitest';
import { parsePlan } from '../../../engine/plan/parse.ts';
import { simulate } from '../../../engine/train/simulate.ts';
import { planGpu } from '../../../cli/gpus.ts';
import { expectPlacedElsewhereAllocatingLess } from './allocations.ts';

describe('eager attention with reentrant checkpointing', () => {
  it('GPT-2 in AMP: every allocation and free in order over 8 steps; reserved exact; with its own segment addresses, both peaks exact', () => {
    // a block of 230 KiB less where it lands among the segments the driver placed elsewhere
    expectPlacedElsewhereAllocatingLess('gpt2_small_amp_bf16_eager_reentrant_sgdm', 235_520);
  });

  it("GPT-2's mask goes as the first block's backward ends, the Llama-family's once the next forward rebinds the loss", () => {
    // where step 1's mask is freed: after step 1's backward began, and before or after step 2's mask is made
    const maskFreed = (hf: Record<string, unknown>) => {
      const plan = parsePlan({ format: 'memplan.plan', version: 1, model: { hf_config: hf }, training: { batch_size: 2, seq_len: 64, precision: 'bf16', optimizer: 'sgd', attention: 'eager', activation_checkpointing: 'reentrant', steps: 2 } });
      const events: { action: string; addr: number; label: string }[] = [];
      simulate(plan, { device: planGpu(plan), untilSteady: false, onTrace: (action, addr, _size, _stream, label) => events.push({ action, addr, label: label ?? '' }) });
      const masks = events.flatMap((e, i) => (e.action === 'alloc' && e.label === 'causal mask' ? [i] : []));
      const backward = events.findIndex((e) => e.action === 'alloc' && e.label === 'ones_like(loss)');
      const freed = events.findIndex((e, i) => i > masks[0]! && e.action === 'free_requested' && e.addr === events[masks[0]!]!.addr);
      expect(masks.length).toBe(2);
      expect(freed).toBeGreaterThan(backward);
      return freed < masks[1]! ? 'in step 1' : 'in step 2';
    };
    expect(maskFreed({ model_type: 'gpt2', n_layer: 2, n_embd: 64, n_head: 4, vocab_size: 1000 })).toBe('in step 1');
    expect(maskFreed({ model_type: 'llama', num_hidden_layers: 2, hidden_size: 64, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 128, vocab_size: 1000 })).toBe('in step 2');
  });
});
