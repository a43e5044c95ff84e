/** What every op needs: the simulated GPU and autograd. */
import type { Autograd } from '../autograd/engine.ts';
import type { CudaDevice } from '../tensor/cuda.ts';

export interface Runtime {
  cuda: CudaDevice;
  autograd: Autograd;
}
