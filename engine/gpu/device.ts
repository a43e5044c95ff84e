/**
 * Which GPU a plan runs on, as the engine simulates it. The edges only read files: the CLI reads
 * resources/gpus.json and the cuDNN workspace table with fs, the app's worker imports the catalog and fetches
 * the table; both hand the parsed JSON here. A `DeviceSpec` is plain data (structured-cloneable): the table's
 * lookup index is built inside the engine, once per table object (`convWorkspacesFor`).
 */
import type { Plan } from '../plan/schema.ts';
import { convWorkspaceTable, type ConvWorkspaceTable } from '../ops/conv.ts';
import { findGpu, memoryAvailableToPyTorch, outsideAllocatorBytes, type GpuCatalog, type GpuSpec } from './catalog.ts';

/** The GPU a plan that names none is simulated on. */
export const DEFAULT_GPU = 'h100-sxm';

/**
 * The GPU a simulation runs on: an entry of the GPU catalog plus the cuDNN convolution workspaces measured on it
 * (or the closest measured GPU); null: the fallback pattern (a plan without convolutions needs none).
 */
export type DeviceSpec = Pick<
  GpuSpec,
  'name' | 'total_memory_bytes' | 'non_pytorch_bytes' | 'training_threads_bytes' | 'cublas_workspace_bytes' | 'multi_processor_count' | 'max_threads_per_multi_processor' | 'compute_capability' | 'vendor'
> & {
  /** The catalog id (`custom` for a memory cap larger than the GPU). */
  id?: string;
  /** The parsed resources/cudnn-workspaces-h100.json (plain data), or null. */
  conv_workspaces?: unknown;
};

/** A catalog GPU as the engine simulates it. */
export type Device = GpuSpec & { conv_workspaces: unknown };

/**
 * A catalog GPU with its convolution workspaces. The H100's table serves every GPU: the only one measured so far
 * (cuDNN may pick other algorithms elsewhere).
 */
export function deviceFor(gpu: GpuSpec, convTable: unknown = null): Device {
  return { ...gpu, conv_workspaces: convTable };
}

/**
 * The plan's GPU (`gpu.name`), or the default one when the plan names none or gives only a memory cap. A cap
 * larger than the default GPU can hold describes a custom GPU of that size (the default GPU's other figures).
 * An unknown name is an InputError at `gpu.name` with a suggestion.
 */
export function planGpu(plan: Plan, catalog: GpuCatalog, convTable: unknown = null): Device {
  const name = plan.gpu && 'name' in plan.gpu ? plan.gpu.name : DEFAULT_GPU;
  const gpu = deviceFor(findGpu(catalog, name), convTable);
  const limit = plan.gpu && 'memory_limit_bytes' in plan.gpu ? plan.gpu.memory_limit_bytes : undefined;
  if (limit !== undefined && limit > memoryAvailableToPyTorch(gpu)) {
    return { ...gpu, id: 'custom', name: `custom GPU (${limit} bytes for PyTorch)`, total_memory_bytes: limit + outsideAllocatorBytes(gpu) };
  }
  return gpu;
}

/**
 * What the allocator may reserve: the plan's `gpu.memory_limit_bytes` (set_per_process_memory_fraction), else the
 * device's memory less what a training process holds outside the allocator (memoryAvailableToPyTorch).
 */
export function capBytes(plan: Plan, device: DeviceSpec): number {
  if (plan.gpu && 'memory_limit_bytes' in plan.gpu) return plan.gpu.memory_limit_bytes;
  return memoryAvailableToPyTorch(device);
}

/** Torchvision presets (every one has convolutions: ResNets' layers, ViT's patch embedding). */
const CONV_PRESET = /^(resnet|vit)/;

/**
 * Whether simulating the plan reads the cuDNN workspace table (a convolution anywhere in the model), so an edge
 * loads the 2 MB table only for the plans that need it.
 */
export function planNeedsConvTable(plan: Plan): boolean {
  const m = plan.model;
  if ('torchvision' in m) return true;
  if ('preset' in m) return CONV_PRESET.test(m.preset);
  if ('layers' in m) return JSON.stringify(m.layers).includes('"conv2d"');
  return false;
}

/** One lookup index per table object: a worker keeps one table for its life, the CLI one per process. */
const indexes = new WeakMap<object, ConvWorkspaceTable>();

/** The lookup index of a table given as data (built on first use), or null without a table. */
export function convWorkspacesFor(data: unknown): ConvWorkspaceTable | null {
  if (typeof data !== 'object' || data === null) return null;
  let index = indexes.get(data);
  if (!index) {
    index = convWorkspaceTable(data as Parameters<typeof convWorkspaceTable>[0]);
    indexes.set(data, index);
  }
  return index;
}
