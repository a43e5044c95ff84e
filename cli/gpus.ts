/** The GPU catalog shipped in resources/gpus.json, loaded once at the edge and handed to the engine. */
import catalogJson from '../resources/gpus.json' with { type: 'json' };
import { findGpu, parseGpuCatalog, type GpuCatalog, type GpuSpec } from '../engine/gpu/catalog.ts';
import type { Plan } from '../engine/plan/schema.ts';

export const DEFAULT_GPU = 'h100-sxm';

let catalog: GpuCatalog | undefined;

export function gpuCatalog(): GpuCatalog {
  catalog ??= parseGpuCatalog(catalogJson);
  return catalog;
}

/** The plan's GPU (`gpu.name`), or the default one when the plan names none or gives only a memory cap. */
export function planGpu(plan: Plan): GpuSpec {
  const name = plan.gpu && 'name' in plan.gpu ? plan.gpu.name : DEFAULT_GPU;
  return findGpu(gpuCatalog(), name);
}
