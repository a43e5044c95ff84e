/**
 * Serving the built renderer for the scenarios: engineer B's test bridge (support/bridge.ts) serves out/renderer
 * with the app's headers and answers `window.memplan` with the main process's own handlers on a real SQLite file
 * (a fresh one per server, in a temp folder).
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startBridge, type Bridge } from './support/bridge.ts';
import type { Served } from './harness.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export type ServedWithBridge = Served & { bridge: Bridge };

export async function serveWithBridge(): Promise<ServedWithBridge> {
  const bridge = await startBridge({ rendererDir: join(ROOT, 'out/renderer') });
  return {
    url: bridge.url,
    bridge,
    install: (context) => bridge.install(context),
    close: () => bridge.close(),
  };
}
