/** What every op needs: the simulated GPU and autograd. */
import type { Autograd } from '../autograd/engine.ts';
import type { CudaDevice } from '../tensor/cuda.ts';
import type { Autocast } from './autocast.ts';

export interface Runtime {
  cuda: CudaDevice;
  autograd: Autograd;
  /** The active `torch.autocast` region, or null. */
  autocast: Autocast | null;
  /** Replay repeated blocks where that is exact (Note [Reused blocks], models/block-reuse.ts). */
  reuseBlocks?: boolean;
  /** Whether replayed blocks' storages are read by their labels (peak details, a recorded run); default: peak details. */
  blockLabels?: boolean;
}
