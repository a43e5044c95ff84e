/**
 * The GPU catalog shipped in resources/gpus.json and the cuDNN workspace table measured on the H100
 * (resources/cudnn-workspaces-h100.json.gz, 4 MB: read only for a plan with a convolution), read from disk here
 * and handed to the engine, which resolves the plan's GPU (engine/gpu/device.ts).
 */
import { readFileSync } from 'node:fs';
import catalogJson from '../resources/gpus.json' with { type: 'json' };
import { deviceFor as engineDeviceFor, maybeGunzip, parseGpuCatalog, planGpu as enginePlanGpu, planNeedsConvTable, type Device, type GpuCatalog, type GpuSpec, type Plan } from '../engine/index.ts';

export { DEFAULT_GPU } from '../engine/index.ts';

let catalog: GpuCatalog | undefined;
let convTable: unknown;

export function gpuCatalog(): GpuCatalog {
  catalog ??= parseGpuCatalog(catalogJson);
  return catalog;
}

/** The cuDNN workspace table as data, read once per process. */
export function convWorkspaceData(): unknown {
  convTable ??= JSON.parse(new TextDecoder().decode(maybeGunzip(readFileSync(new URL('../resources/cudnn-workspaces-h100.json.gz', import.meta.url)))));
  return convTable;
}

/** A catalog GPU as the engine simulates it, with the convolution table (for any plan). */
export function deviceFor(gpu: GpuSpec): Device {
  return engineDeviceFor(gpu, convWorkspaceData());
}

/** The plan's GPU from the catalog (the default one when it names none); the table only when the plan needs it. */
export function planGpu(plan: Plan): Device {
  return enginePlanGpu(plan, gpuCatalog(), planNeedsConvTable(plan) ? convWorkspaceData() : null);
}

/** A catalog GPU as the engine simulates the plan on it (the convolution table only when the plan needs it). */
export function gpuDevice(plan: Plan, gpu: GpuSpec): Device {
  return engineDeviceFor(gpu, planNeedsConvTable(plan) ? convWorkspaceData() : null);
}
