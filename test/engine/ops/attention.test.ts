/**
 * cuDNN attention against the H100 probes (test/fixtures/workspaces/h100-workspaces.json, recorded with
 * resources/measure/probe_workspaces.py): every allocation of forward and backward, in order and size, for 11
 * shapes (head dims 64, 80 and 128, grouped-query attention, fp16 and bf16, causal or not, dropout).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CachingAllocator } from '../../../engine/allocator/caching-allocator.ts';
import { parseAllocatorConf } from '../../../engine/allocator/config.ts';
import { SimulatedDevice } from '../../../engine/allocator/device-memory.ts';
import { Autograd, Parameter } from '../../../engine/autograd/engine.ts';
import { scaledDotProductAttention, sdpaBackend } from '../../../engine/ops/attention.ts';
import { CudaDevice } from '../../../engine/tensor/cuda.ts';
import type { DType } from '../../../engine/tensor/dtype.ts';

interface Probe {
  backend?: string;
  case: { batch: number; heads: number; kv_heads: number; seq: number; head_dim: number; dtype: DType; causal: boolean; dropout: number };
  grad_fn: string;
  forward_allocs: number[];
  backward_allocs: number[];
}

const fixture = JSON.parse(readFileSync(new URL('../../fixtures/workspaces/h100-workspaces.json', import.meta.url), 'utf8')) as { attention: Probe[]; attention_backends: Probe[] };
const probes = fixture.attention;

function runtime() {
  const sizes: number[] = [];
  const allocator = new CachingAllocator({
    config: parseAllocatorConf('', 'conf'),
    device: new SimulatedDevice(80 * 2 ** 30),
    totalGlobalMemBytes: 80 * 2 ** 30,
    nonPyTorchBytes: 0,
    onTrace: (action, _addr, size) => {
      if (action === 'alloc') sizes.push(size);
    },
  });
  const cuda = new CudaDevice(allocator, { cublasBytes: 0, cublasLtBytes: 0 }, { multiProcessorCount: 132, maxThreadsPerMultiProcessor: 2048 });
  return { rt: { cuda, autograd: new Autograd(cuda), autocast: null }, sizes };
}

describe('cuDNN attention on the H100', () => {
  it('is the backend PyTorch picked for every probe', () => {
    expect(probes.length).toBe(11);
    for (const p of probes) expect(p.grad_fn).toBe('ScaledDotProductCudnnAttentionBackward0');
  });
  for (const p of probes) {
    const c = p.case;
    it(`B=${c.batch} H=${c.heads}/${c.kv_heads} L=${c.seq} D=${c.head_dim} ${c.dtype}: forward and backward allocations`, () => {
      const { rt, sizes } = runtime();
      const leaf = (heads: number, name: string) => new Parameter(name, rt.cuda.empty([c.batch, heads, c.seq, c.head_dim], c.dtype, name), rt.cuda).tensor;
      const q = leaf(c.heads, 'q');
      const k = leaf(c.kv_heads, 'k');
      const v = leaf(c.kv_heads, 'v');
      expect(sdpaBackend(q.dtype, c.heads, c.kv_heads, { computeCapability: [9, 0] })).toBe('cudnn');
      sizes.length = 0;
      const out = scaledDotProductAttention(rt, q, k, v, 'cudnn', { dropoutP: c.dropout, label: 'attention' });
      expect(sizes).toEqual(p.forward_allocs);
      const grad = rt.cuda.empty(out.shape, out.dtype, 'grad');
      sizes.length = 0;
      rt.autograd.backward(out, grad);
      // dq, dk, dv, the workspace; AccumulateGrad steals them (no further allocation)
      expect(sizes).toEqual(p.backward_allocs);
    });
  }
});

describe('flash, memory-efficient and math attention, forced on the H100', () => {
  const backends = { FLASH_ATTENTION: 'flash', EFFICIENT_ATTENTION: 'efficient', MATH: 'math' } as const;
  it('covers both backends, fp32 included', () => {
    expect(fixture.attention_backends.filter((p) => p.backend === 'FLASH_ATTENTION').length).toBe(11);
    expect(fixture.attention_backends.some((p) => p.backend === 'EFFICIENT_ATTENTION' && p.case.dtype === 'float32')).toBe(true);
  });
  for (const p of fixture.attention_backends) {
    const c = p.case;
    const backend = backends[p.backend as keyof typeof backends];
    it(`${backend} B=${c.batch} H=${c.heads}/${c.kv_heads} L=${c.seq} D=${c.head_dim} ${c.dtype} dropout ${c.dropout}`, () => {
      const { rt, sizes } = runtime();
      const leaf = (heads: number, name: string) => new Parameter(name, rt.cuda.empty([c.batch, heads, c.seq, c.head_dim], c.dtype, name), rt.cuda).tensor;
      const q = leaf(c.heads, 'q');
      const k = leaf(c.kv_heads, 'k');
      const v = leaf(c.kv_heads, 'v');
      sizes.length = 0;
      const out = scaledDotProductAttention(rt, q, k, v, backend, { dropoutP: c.dropout, label: 'attention' });
      // the forward's own allocations are the last ones recorded (see the fixture's note)
      expect(p.forward_allocs.slice(-sizes.length)).toEqual(sizes);
      expect(sizes.length).toBeGreaterThanOrEqual(2);
      const grad = rt.cuda.empty(out.shape, out.dtype, 'grad');
      sizes.length = 0;
      rt.autograd.backward(out, grad);
      if (backend !== 'math') {
        expect(sizes).toEqual(p.backward_allocs);
        return;
      }
      // The probe's q, k, v are leaves in [B, L, H, D] memory: AccumulateGrad copied each [B, H, L, D]
      // gradient to their strides (the layout contract), one allocation per leaf that a model's views do not
      // make. Everything else is the same sequence.
      expect(p.backward_allocs.length - sizes.length).toBe(3);
      let i = 0;
      for (const size of p.backward_allocs) if (i < sizes.length && sizes[i] === size) i++;
      expect(i).toBe(sizes.length);
    });
  }
});

describe('the backend PyTorch 2.11 picks without a mask (sdp_utils.cpp)', () => {
  const on = (major: number, vendor?: 'amd') => ({ computeCapability: [major, 0] as [number, number], ...(vendor ? { vendor } : {}) });
  it('cuDNN attention on compute capability 9 and 10, flash attention from 8.0 and on AMD, neither before 8.0', () => {
    expect(sdpaBackend('bfloat16', 8, 8, on(9))).toBe('cudnn');
    expect(sdpaBackend('float16', 8, 2, on(10))).toBe('cudnn');
    expect(sdpaBackend('bfloat16', 8, 2, on(8))).toBe('flash');
    expect(sdpaBackend('float16', 8, 8, on(9, 'amd'))).toBe('flash');
    // the V100 and T4: the memory-efficient kernel in fp16 (no grouped-query kernel: math then), bf16 math
    expect(sdpaBackend('float16', 8, 8, on(7))).toBe('efficient');
    expect(sdpaBackend('float16', 8, 2, on(7))).toBe('math');
    expect(sdpaBackend('bfloat16', 8, 8, on(7))).toBe('math');
    // fp32 everywhere: memory-efficient, or math with fewer key/value heads
    expect(sdpaBackend('float32', 8, 8, on(9))).toBe('efficient');
    expect(sdpaBackend('float32', 8, 2, on(7))).toBe('math');
  });
});
