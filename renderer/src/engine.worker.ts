/**
 * The engine's Web Worker: one stays warm for the app's life and runs engine/worker/'s host (docs/app.md's
 * protocol). The GPU catalog is bundled; the cuDNN convolution table (4 MB gzipped) is fetched the first time a
 * plan needs it. Pauses between trials go through a MessageChannel, which unlike setTimeout is not clamped to 4 ms.
 */
import convTableUrl from '../../resources/cudnn-workspaces-h100.json.gz?url';
import catalog from '../../resources/gpus.json';
import { createEngineHost, maybeGunzip, type EngineAnswer } from '../../engine/index.ts';

async function convTable(): Promise<unknown> {
  const response = await fetch(convTableUrl);
  if (!response.ok) throw new Error(`could not load the cuDNN workspace table (${response.status})`);
  const bytes = maybeGunzip(new Uint8Array(await response.arrayBuffer()));
  return JSON.parse(new TextDecoder().decode(bytes));
}

const channel = new MessageChannel();
const waiting: (() => void)[] = [];
channel.port1.onmessage = () => waiting.shift()?.();
function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => {
    waiting.push(resolve);
    channel.port2.postMessage(null);
  });
}

const host = createEngineHost({ catalog, convTable, yieldToEventLoop });
const scope = self as unknown as { postMessage(answer: EngineAnswer, transfer: Transferable[]): void; onmessage: ((e: MessageEvent<unknown>) => void) | null };
// A snapshot's bytes go back to the renderer as they came: transferred, not copied.
const transfer = (answer: EngineAnswer): Transferable[] => (answer.kind === 'replay_result' && answer.bytes instanceof ArrayBuffer ? [answer.bytes] : []);
scope.onmessage = (event) => void host.handle(event.data, (answer) => scope.postMessage(answer, transfer(answer)));
