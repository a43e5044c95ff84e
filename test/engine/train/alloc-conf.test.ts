/**
 * Training under the allocator settings users copy from the posts on fragmentation (PYTORCH_CUDA_ALLOC_CONF:
 * max_split_size_mb, garbage_collection_threshold, roundup_power2_divisions), against runs recorded on the H100
 * (2026-11-28, PyTorch 2.11; resources/measure/boundary_trials.py). GPT-2 and a checkpointed Llama under
 * max_split_size_mb:128 and Qwen3 under roundup_power2_divisions:4 match allocation for allocation (the calibration
 * test's EXACT list); the garbage collector, which runs only under a cap, is checked here. The boundary suite holds
 * seven real searches under these settings (test/fixtures/boundary-suite/suite.json), each found exactly.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { planGpu } from '../../../cli/gpus.ts';
import { parsePlan } from '../../../engine/plan/parse.ts';
import { comparableTrace } from '../../../engine/snapshot/compare.ts';
import { readSnapshotBytes } from '../../../engine/snapshot/snapshot.ts';
import { simulate } from '../../../engine/train/simulate.ts';
import { expectSameRequestsPlacedElsewhere, recording } from '../models/allocations.ts';

describe('training under PYTORCH_CUDA_ALLOC_CONF as the posts set it', () => {
  it('the exact recordings ran with the settings their plans name', () => {
    for (const [name, conf] of [
      ['gpt2_small_amp_bf16_adamw_s1024_b8_maxsplit128', 'max_split_size_mb:128'],
      ['llama_4l_bf16_ckpt_adamw_s2048_b4_maxsplit128', 'max_split_size_mb:128'],
      ['qwen3_4l_bf16_sgdm_s1024_b4_roundup4', 'roundup_power2_divisions:4'],
    ] as const) {
      const m = recording(name);
      expect(m.alloc_conf, name).toBe(conf);
      expect(parsePlan(m.plan).allocator.conf, name).toBe(conf);
    }
  });

  it('ResNet-50 under garbage_collection_threshold:0.6,max_split_size_mb:128 and a 6 GiB cap: the same requests, and the collections free what PyTorch freed', () => {
    const name = 'resnet50_amp_bf16_sgdm_b96_gc06_maxsplit128_cap6g';
    // the real trace replayed with its own segment addresses, its settings and its cap: every segment the garbage
    // collector gave back, in PyTorch's order (it frees the unsplit cached blocks at least as old as their average)
    const r = expectSameRequestsPlacedElsewhere(name);
    const m = recording(name);
    const snapshot = readSnapshotBytes(readFileSync(new URL(`../../fixtures/calibration/${name}.pickle.gz`, import.meta.url)));
    expect(snapshot.trace.filter((e) => e.action === 'segment_free').length).toBeGreaterThan(100);
    // memplan's own placement collects other blocks in places, and peaks as PyTorch did
    expect(r.peak_allocated_bytes).toBe(m.peak_allocated_bytes);
    expect(r.peak_reserved_bytes).toBe(m.peak_reserved_bytes);
  });

  it('BERT-base in AMP fp16 under garbage_collection_threshold:0.8 and 8 GiB runs out at batch 24 where the H100 did', () => {
    const dir = new URL('../../fixtures/boundary-suite/recordings/', import.meta.url);
    const name = 'bert_base_amp_fp16_adamw_s512_gc08_cap8g_b24';
    const m = JSON.parse(readFileSync(new URL(`${name}.json`, dir), 'utf8')) as { plan: unknown; status: string; oom_message: string; peak_allocated_bytes: number; peak_reserved_bytes: number };
    expect(m.status).toBe('oom');
    const real = comparableTrace(readSnapshotBytes(readFileSync(new URL(`${name}.pickle.gz`, dir))).trace);
    const plan = parsePlan(m.plan);
    const events: { action: string; addr: number; size: number }[] = [];
    const r = simulate(plan, { device: planGpu(plan), untilSteady: false, timelinePoints: 0, peakDetails: false, onTrace: (action, addr, size) => events.push({ action, addr, size }) });
    expect(r.oom).toMatchObject({ step: 1, phase: 'forward' });
    expect(r.oom!.message).toContain('Tried to allocate 1.40 GiB');
    expect(m.oom_message).toContain('Tried to allocate 1.40 GiB');
    // every allocation, free, segment and collection up to the error, as the H100 made them (its trace goes on
    // with the frees of the exception unwinding)
    const sim = comparableTrace(events);
    expect(sim.filter((e) => e.startsWith('segment_free')).length).toBeGreaterThan(0);
    expect(sim.at(-1)).toMatch(/^oom /);
    expect(real.slice(0, sim.length)).toEqual(sim);
    expect(r.peak_allocated_bytes).toBe(m.peak_allocated_bytes);
    expect(r.peak_reserved_bytes).toBe(m.peak_reserved_bytes);
  });
});
