/**
 * A worker thread of the CLI's advice (cli/advice-workers.ts): simulates one variant of a plan at a time, as
 * engine/search/advice.ts's adviceVariant does on the main thread, and posts back its outcome.
 */
import * as nodeModule from 'node:module';
import { parentPort } from 'node:worker_threads';
import { adviseVariant, type AdviceSetup, type DeviceSpec, type Variant } from '../engine/index.ts';
import { convWorkspaceData } from './gpus.ts';

nodeModule.enableCompileCache?.(); // Note [Compile cache] (cli/memplan.ts): this thread loads the engine again

/** What the main thread sends: the variant, and the device without its convolution table (read here from disk). */
export interface VariantRequest {
  setup: AdviceSetup;
  variant: Variant;
  device: Omit<DeviceSpec, 'conv_workspaces'>;
  convTable: boolean;
}

/** What comes back: the outcome, or the error that stopped the simulation (an internal error: exit 1). */
export type VariantReply = { outcome: ReturnType<typeof adviseVariant> } | { error: string };

parentPort!.on('message', (request: VariantRequest) => {
  let reply: VariantReply;
  try {
    const device: DeviceSpec = { ...request.device, conv_workspaces: request.convTable ? convWorkspaceData() : null };
    reply = { outcome: adviseVariant(request.setup, request.variant, device) };
  } catch (error) {
    reply = { error: error instanceof Error ? (error.stack ?? error.message) : String(error) };
  }
  parentPort!.postMessage(reply);
});
