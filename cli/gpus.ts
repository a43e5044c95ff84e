/**
 * The GPU catalog shipped in resources/gpus.json and the cuDNN workspace table measured on the H100
 * (resources/cudnn-workspaces-h100.json.gz, 2 MB: read the first time a convolution needs it), loaded at the edge
 * and handed to the engine.
 */
import { readFileSync } from 'node:fs';
import catalogJson from '../resources/gpus.json' with { type: 'json' };
import { maybeGunzip } from '../engine/snapshot/gzip.ts';
import { findGpu, parseGpuCatalog, type GpuCatalog, type GpuSpec } from '../engine/gpu/catalog.ts';
import { convWorkspaceTable, type ConvWorkspaceTable } from '../engine/ops/conv.ts';
import type { Plan } from '../engine/plan/schema.ts';
import type { DeviceSpec } from '../engine/train/simulate.ts';

export const DEFAULT_GPU = 'h100-sxm';

let catalog: GpuCatalog | undefined;
let workspaces: ConvWorkspaceTable | undefined;

export function gpuCatalog(): GpuCatalog {
  catalog ??= parseGpuCatalog(catalogJson);
  return catalog;
}

/**
 * A catalog GPU as the engine simulates it. The convolution workspaces are the H100's for every GPU: the only
 * table measured so far (cuDNN may pick other algorithms elsewhere).
 */
export function deviceFor(gpu: GpuSpec): DeviceSpec & GpuSpec {
  workspaces ??= lazyTable(() => {
    const file = new URL('../resources/cudnn-workspaces-h100.json.gz', import.meta.url);
    return convWorkspaceTable(JSON.parse(new TextDecoder().decode(maybeGunzip(readFileSync(file)))));
  });
  return { ...gpu, convWorkspaces: workspaces };
}

/** A table read on its first lookup (most plans have no convolution). */
function lazyTable(load: () => ConvWorkspaceTable): ConvWorkspaceTable {
  let table: ConvWorkspaceTable | undefined;
  return {
    lookup(...args) {
      table ??= load();
      return table.lookup(...args);
    },
  };
}

/**
 * The plan's GPU (`gpu.name`), or the default one when the plan names none or gives only a memory cap. A cap
 * larger than the default GPU can hold describes a custom GPU of that size (the default GPU's other figures).
 */
export function planGpu(plan: Plan): DeviceSpec & GpuSpec {
  const name = plan.gpu && 'name' in plan.gpu ? plan.gpu.name : DEFAULT_GPU;
  const gpu = deviceFor(findGpu(gpuCatalog(), name));
  const limit = plan.gpu && 'memory_limit_bytes' in plan.gpu ? plan.gpu.memory_limit_bytes : undefined;
  if (limit !== undefined && limit > gpu.total_memory_bytes - gpu.non_pytorch_bytes) {
    return { ...gpu, id: 'custom', name: `custom GPU (${limit} bytes for PyTorch)`, total_memory_bytes: limit + gpu.non_pytorch_bytes };
  }
  return gpu;
}
