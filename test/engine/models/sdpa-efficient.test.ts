/**
 * Sliding-window attention past the window on GPUs without cuDNN attention (the A100, L40S, RTX cards): SDPA gets a
 * mask, flash attention takes none, and PyTorch runs the memory-efficient kernel with the mask as a bias. Recorded
 * on the H100 with cuDNN and flash attention turned off (memplan_measure.py with MEMPLAN_SDPA_DISABLE=cudnn,flash,
 * resources/measure/scenarios/efficient), which is how an A100 chooses; simulated on the H100 with an A100's compute
 * capability, so that only the attention kernel differs from the H100 the recordings ran on.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parsePlan } from '../../../engine/plan/parse.ts';
import { readSnapshotBytes } from '../../../engine/snapshot/snapshot.ts';
import { simulate } from '../../../engine/train/simulate.ts';
import { planGpu } from '../../../cli/gpus.ts';
import { requestsOf } from './allocations.ts';

const dir = new URL('../../fixtures/calibration-sdpa-efficient/', import.meta.url);
const names = readdirSync(dir).filter((f) => f.endsWith('.json')).map((f) => f.replace(/\.json$/, '')).sort();

interface Recording {
  plan: unknown;
  peak_allocated_bytes: number;
  peak_reserved_bytes: number;
  environment: { device_name: string; sdpa_enabled: Record<string, boolean> };
}

/** The run simulated as the recording ran: the plan's H100, its SDPA choosing as an A100's does (compute capability 8.0). */
function simulated(m: Recording) {
  const plan = parsePlan(m.plan);
  const events: { action: string; addr: number; size: number; label: string }[] = [];
  const device = { ...planGpu(plan), compute_capability: [8, 0] as [number, number] };
  const r = simulate(plan, { device, untilSteady: false, timelinePoints: 0, onTrace: (action, addr, size, _stream, label) => events.push({ action, addr, size, label: label ?? '' }) });
  return { r, events };
}

describe('memory-efficient attention with a sliding-window mask (as the A100 runs it)', () => {
  it('has three recordings, each made with cuDNN and flash attention off on the H100', () => {
    expect(names).toEqual(['mistral_4l_amp_bf16_window256_ckpt_efficient', 'mistral_4l_bf16_window256_s512_efficient', 'phi3_4l_amp_bf16_s2048_window_efficient']);
    for (const name of names) {
      const m = JSON.parse(readFileSync(new URL(`${name}.json`, dir), 'utf8')) as Recording;
      expect(m.environment.device_name, name).toBe('NVIDIA H100 80GB HBM3');
      expect(m.environment.sdpa_enabled, name).toEqual({ cudnn: false, flash: false, mem_efficient: true, math: true });
    }
  });

  for (const name of names) {
    it(`${name}: peaks as recorded (allocated within 0.2%, reserved exact)`, () => {
      const m = JSON.parse(readFileSync(new URL(`${name}.json`, dir), 'utf8')) as Recording;
      const { r, events } = simulated(m);
      expect(r.oom).toBeNull();
      expect(r.peak_reserved_bytes).toBe(m.peak_reserved_bytes);
      expect(Math.abs(r.peak_allocated_bytes / m.peak_allocated_bytes - 1)).toBeLessThan(0.002);
      // the kernel that ran: the memory-efficient backward's workspace, the mask kept as a bias for it
      expect(events.some((e) => e.label.endsWith('attention backward: workspace'))).toBe(true);
      expect(events.some((e) => e.label.endsWith('attention mask as bias'))).toBe(true);
    });
  }

  it('the AMP Mistral with checkpointing and the Phi-3 at 2048 tokens: the same allocations and frees, in order, to the teardown', () => {
    for (const name of ['mistral_4l_amp_bf16_window256_ckpt_efficient', 'phi3_4l_amp_bf16_s2048_window_efficient']) {
      const m = JSON.parse(readFileSync(new URL(`${name}.json`, dir), 'utf8')) as Recording;
      const real = requestsOf(readSnapshotBytes(readFileSync(new URL(`${name}.pickle.gz`, dir))).trace);
      const { r, events } = simulated(m);
      expect(real.length, name).toBeGreaterThan(3000);
      expect(requestsOf(events).slice(0, real.length), name).toEqual(real);
      expect(r.peak_allocated_bytes, name).toBe(m.peak_allocated_bytes);
    }
  });

  it('is what a bf16 plan past its window runs on a catalog A100 (no longer refused); fp32 there stays refused', () => {
    const m = JSON.parse(readFileSync(new URL('phi3_4l_amp_bf16_s2048_window_efficient.json', dir), 'utf8')) as Recording & { plan: { gpu?: unknown } };
    const plan = parsePlan({ ...m.plan, gpu: { name: 'a100-80gb' } });
    const labels: string[] = [];
    const r = simulate(plan, { device: planGpu(plan), untilSteady: false, timelinePoints: 0, onTrace: (_a, _p, _s, _st, label) => labels.push(label ?? '') });
    expect(r.oom).toBeNull();
    expect(labels.some((l) => l.endsWith('attention backward: workspace'))).toBe(true);
    const fp32 = parsePlan({ ...m.plan, gpu: { name: 'a100-80gb' }, training: { ...(m.plan as { training: object }).training, precision: 'fp32' } });
    expect(() => simulate(fp32, { device: planGpu(fp32), untilSteady: false, timelinePoints: 0 })).toThrow(/training\.seq_len: reaches the sliding window: .* not yet in float32/);
  });
});
