/** Shared by the main-process tests: a temp folder per test and plans to store. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import catalogJson from '../../resources/gpus.json' with { type: 'json' };
import { findMaxBatch, parseGpuCatalog, parsePlan, planGpu, simulate, type MaxBatchResult, type SimulateResult } from '../../engine/index.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A fresh folder, removed after the test. */
export function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'memplan-electron-'));
  dirs.push(dir);
  return dir;
}

/** A complete plan (passes the engine's plan schema). */
export function resnetPlan(batch = 128): Record<string, unknown> {
  return {
    format: 'memplan.plan',
    version: 1,
    name: 'ResNet-50, AMP fp16',
    model: { preset: 'resnet50' },
    training: { batch_size: batch, image_size: 224, precision: 'amp_fp16', optimizer: 'sgd_momentum' },
    gpu: { name: 'a100-80gb' },
  };
}

/** A small layer-list plan on the H100 (simulates in milliseconds). */
export function mlpPlan(batch = 64): Record<string, unknown> {
  return {
    format: 'memplan.plan',
    version: 1,
    name: 'MLP',
    model: { input_features: 1024, layers: [{ type: 'linear', in_features: 1024, out_features: 4096 }, { type: 'relu' }, { type: 'linear', in_features: 4096, out_features: 10 }] },
    training: { batch_size: batch, precision: 'amp_bf16', optimizer: 'adamw' },
    gpu: { name: 'h100-sxm' },
  };
}

let results: { simulate: SimulateResult; maxBatch: MaxBatchResult } | undefined;

/** Real engine results for mlpPlan() (typed-array timeline columns included), computed once. */
export function engineResults(): { simulate: SimulateResult; maxBatch: MaxBatchResult } {
  if (!results) {
    const catalog = parseGpuCatalog(catalogJson);
    const plan = parsePlan(mlpPlan(), { catalog });
    const device = planGpu(plan, catalog);
    results = { simulate: simulate(plan, { device }), maxBatch: findMaxBatch(plan, { device, maxBatch: 4096 }) };
  }
  return results;
}
