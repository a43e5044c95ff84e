/**
 * The e2e test bridge: the built renderer and the main process's API without Electron (whose binary cannot be
 * downloaded on the test machines).
 *
 * A Node http server on 127.0.0.1 (a free port) that
 * - serves the built renderer (out/renderer) with the same headers as the app:// protocol (the same CSP), through
 *   the same path resolution (electron/main/security/renderer-files.ts);
 * - answers `POST /ipc/<channel>` with the main process's own dispatch and handlers (electron/main/handlers: the
 *   contract's validation included) on a real SQLite file, opened as the app opens it (electron/main/storage);
 *   only calls whose Origin is the bridge's own are accepted, as Electron accepts only app://memplan;
 * - answers the file dialogs from queues the test fills (`queueOpenFile`), keeps what "Save" wrote (`savedFiles`,
 *   `savedBinaries`, `savedReports`);
 * - sends application-menu commands to the page as server-sent events (`sendMenuCommand`).
 *
 * The page gets `window.memplan` from bridge-client.ts: `await bridge.install(context)` (or
 * `page.addInitScript(bridge.clientScript)`). In a scenario:
 *
 *   const bridge = await startBridge({ rendererDir: 'out/renderer' });   // a fresh database in a temp folder
 *   await bridge.install(context);
 *   await page.goto(bridge.url);
 *   bridge.queueOpenFile({ name: 'config.json', text });                  // the next open dialog's answer
 *   bridge.sendMenuCommand('import-hf-config');                           // as if chosen in the menu
 *   ...
 *   await bridge.close();
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { BrowserContext } from 'playwright-core';
import { INVOKE_CHANNELS, type AppInfo, type ChannelResult, type IpcAnswer, type MenuCommand, type StorageNotice } from '../../../electron/common/ipc.ts';
import { dispatch } from '../../../electron/main/handlers/dispatch.ts';
import { createHandlers, type Dialogs } from '../../../electron/main/handlers/handlers.ts';
import { rendererResponse } from '../../../electron/main/security/renderer-files.ts';
import { openStorage, type Storage } from '../../../electron/main/storage/index.ts';
import { installMemplanClient } from './bridge-client.ts';

/** An IPC call's body: a plan with a pasted config.json and a result with its timeline fit well within this. */
const MAX_BODY_BYTES = 64 * 1024 * 1024;

export type QueuedFile = { name: string; text: string } | { name: string; bytes: Uint8Array };

export interface BridgeOptions {
  /** The built renderer (`out/renderer`). */
  rendererDir: string;
  /** The SQLite file (created, migrated, checked as in the app); default: plans.sqlite in a temp folder that
   * close() removes. */
  dbPath?: string;
  /** app.info()'s version (default '0.0.0-test'). */
  version?: string;
}

export interface Bridge {
  /** `http://127.0.0.1:<port>/`: open this in the page. */
  url: string;
  origin: string;
  /** The script that defines `window.memplan` in the page: `page.addInitScript(bridge.clientScript)`. */
  clientScript: string;
  /** Defines `window.memplan` in every page of a browser context (before any page script runs). */
  install(context: Pick<BrowserContext, 'addInitScript'>): Promise<void>;
  /** The SQLite file in use. */
  dbPath: string;
  /** The next open dialog answers this file (in order; an empty queue answers "cancelled"); null queues a cancel. */
  queueOpenFile(file: QueuedFile | null): void;
  /** The next save dialog answers this name (default: the suggested name); null queues a cancel. */
  queueSaveAnswer(name: string | null): void;
  /** Every file a save dialog "wrote", in order. */
  readonly savedFiles: { name: string; text: string }[];
  /** Every binary file (files.saveBytes: a chart's PNG) a save dialog "wrote", in order. */
  readonly savedBinaries: { name: string; bytes: Uint8Array }[];
  /** Every report (files.saveReport: the Markdown and the images beside it) a save dialog "wrote", in order. */
  readonly savedReports: { name: string; text: string; images: { name: string; bytes: Uint8Array }[] }[];
  /** Every dialog the page asked for, in order. */
  readonly dialogsShown: { kind: 'openText' | 'openBytes' | 'saveText' | 'saveBytes' | 'saveReport'; purpose: string }[];
  /** Sends an application-menu command to the page (queued until the page listens). */
  sendMenuCommand(command: MenuCommand): void;
  /** The application menu's language and checked choice, as the page last reported them (app.setLocale); null before. */
  readonly menuLocale: { locale: string; choice: string } | null;
  /** Every IPC call answered, in order (for assertions: `calls.filter((c) => c.channel === 'plans:save')`). */
  readonly calls: { channel: string; ok: boolean; message?: string }[];
  /** The storage the handlers use (to seed or inspect plans directly). */
  readonly storage: Storage;
  close(): Promise<void>;
}

function bytesToBase64(bytes: ArrayBuffer): string {
  return Buffer.from(bytes).toString('base64');
}

/** `{ $bytes_base64 }` in a call's arguments (bridge-client.ts sends an ArrayBuffer so) back to an ArrayBuffer. */
function bytesReviver(_key: string, value: unknown): unknown {
  if (value && typeof value === 'object' && typeof (value as { $bytes_base64?: unknown }).$bytes_base64 === 'string') {
    const bytes = Buffer.from((value as { $bytes_base64: string }).$bytes_base64, 'base64');
    return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
  }
  return value;
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new Error(`request body over ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export async function startBridge(options: BridgeOptions): Promise<Bridge> {
  const tempFolder = options.dbPath === undefined ? mkdtempSync(join(tmpdir(), 'memplan-bridge-')) : undefined;
  const dbPath = options.dbPath ?? join(tempFolder!, 'plans.sqlite');
  const storage = openStorage(dbPath);
  const openQueue: (QueuedFile | null)[] = [];
  const saveQueue: (string | null)[] = [];
  const savedFiles: { name: string; text: string }[] = [];
  const savedBinaries: Bridge['savedBinaries'] = [];
  const savedReports: Bridge['savedReports'] = [];
  const dialogsShown: Bridge['dialogsShown'] = [];
  const calls: Bridge['calls'] = [];
  let menuLocale: Bridge['menuLocale'] = null;
  const menuClients = new Set<ServerResponse>();
  const pendingCommands: MenuCommand[] = [];
  let origin = '';

  const dialogs: Dialogs = {
    async openText(purpose): Promise<ChannelResult<'files:openText'>> {
      dialogsShown.push({ kind: 'openText', purpose });
      const file = openQueue.shift() ?? null;
      if (!file) return null;
      return { name: file.name, text: 'text' in file ? file.text : Buffer.from(file.bytes).toString('utf8') };
    },
    async openBytes(purpose): Promise<ChannelResult<'files:openBytes'>> {
      dialogsShown.push({ kind: 'openBytes', purpose });
      const file = openQueue.shift() ?? null;
      if (!file) return null;
      const bytes = 'bytes' in file ? file.bytes : new TextEncoder().encode(file.text);
      return { name: file.name, bytes: bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer };
    },
    async saveText({ suggested_name, text }): Promise<ChannelResult<'files:saveText'>> {
      dialogsShown.push({ kind: 'saveText', purpose: suggested_name });
      const answer = saveQueue.length > 0 ? saveQueue.shift()! : suggested_name;
      if (answer === null) return null;
      savedFiles.push({ name: answer, text });
      return { name: answer };
    },
    async saveBytes({ suggested_name, bytes }): Promise<ChannelResult<'files:saveBytes'>> {
      dialogsShown.push({ kind: 'saveBytes', purpose: suggested_name });
      const answer = saveQueue.length > 0 ? saveQueue.shift()! : suggested_name;
      if (answer === null) return null;
      savedBinaries.push({ name: answer, bytes: new Uint8Array(bytes) });
      return { name: answer };
    },
    async saveReport({ suggested_name, text, images }): Promise<ChannelResult<'files:saveReport'>> {
      dialogsShown.push({ kind: 'saveReport', purpose: suggested_name });
      const answer = saveQueue.length > 0 ? saveQueue.shift()! : suggested_name;
      if (answer === null) return null;
      savedReports.push({ name: answer, text, images: images.map((image) => ({ name: image.name, bytes: new Uint8Array(image.bytes) })) });
      return { name: answer, images: images.map((image) => image.name) };
    },
  };
  const notices: StorageNotice[] = storage.notices;
  const info = (): AppInfo => ({
    name: 'memplan',
    version: options.version ?? '0.0.0-test',
    electron_version: null,
    platform: process.platform,
    data_dir: dirname(dbPath),
    database_path: dbPath,
    notices,
  });
  const handlers = createHandlers({
    plans: storage.plans,
    comparisons: storage.comparisons,
    snapshots: storage.snapshots,
    dialogs,
    info,
    setMenuLocale: (locale, choice) => (menuLocale = { locale, choice }),
  });
  const isTrustedSender = (url: string | undefined) => url === origin;

  async function answerIpc(request: IncomingMessage, response: ServerResponse, channel: string): Promise<void> {
    const body = await readBody(request);
    let answer: IpcAnswer<unknown>;
    try {
      // `null` stands for "no arguments" (JSON has no undefined), as ipcRenderer.invoke(channel) sends none.
      const args: unknown = body === '' ? undefined : (JSON.parse(body, bytesReviver) ?? undefined);
      answer = await dispatch(handlers, channel, args, { url: request.headers.origin }, isTrustedSender);
    } catch (error) {
      if (!(error instanceof SyntaxError)) throw error;
      answer = { ok: false, error: { code: 'invalid_args', message: `${channel.replace(':', '.')}: the request body is not JSON` } };
    }
    calls.push(answer.ok ? { channel, ok: true } : { channel, ok: false, message: answer.error.message });
    const json = JSON.stringify(answer, (_key, value: unknown) => (value instanceof ArrayBuffer ? { $bytes_base64: bytesToBase64(value) } : value));
    response.writeHead(answer.ok || answer.error.code !== 'refused' ? 200 : 403, { 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'no-store' });
    response.end(json);
  }

  function openMenuEvents(response: ServerResponse): void {
    response.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-store', Connection: 'keep-alive' });
    response.write(': memplan menu commands\n\n');
    menuClients.add(response);
    response.on('close', () => menuClients.delete(response));
    for (const command of pendingCommands.splice(0)) response.write(`data: ${JSON.stringify(command)}\n\n`);
  }

  async function serveFile(response: ServerResponse, pathname: string, method: string): Promise<void> {
    const answer = await rendererResponse(options.rendererDir, pathname, readFile);
    response.writeHead(answer.status, { ...answer.headers, 'Cache-Control': 'no-store' });
    response.end(method === 'HEAD' ? undefined : answer.body);
  }

  const server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', origin || 'http://127.0.0.1');
    const ipc = /^\/ipc\/([A-Za-z]+:[A-Za-z]+)$/.exec(decodeURIComponent(url.pathname));
    const work =
      request.method === 'POST' && ipc
        ? answerIpc(request, response, ipc[1]!)
        : request.method === 'GET' && url.pathname === '/menu-events'
          ? Promise.resolve(openMenuEvents(response))
          : request.method === 'GET' || request.method === 'HEAD'
            ? serveFile(response, url.pathname, request.method)
            : Promise.resolve(void response.writeHead(405).end());
    work.catch((error: unknown) => {
      if (!response.headersSent) response.writeHead(500, { 'Content-Type': 'text/plain; charset=utf-8' });
      response.end(String((error as Error).message ?? error));
    });
  });
  await new Promise<void>((resolveListen) => server.listen(0, '127.0.0.1', resolveListen));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const clientScript = `(${installMemplanClient.toString()})(${JSON.stringify(INVOKE_CHANNELS)});`;
  return {
    url: `${origin}/`,
    origin,
    clientScript,
    install: (context) => context.addInitScript(clientScript).then(() => undefined),
    dbPath,
    queueOpenFile: (file) => void openQueue.push(file),
    queueSaveAnswer: (name) => void saveQueue.push(name),
    savedFiles,
    savedBinaries,
    savedReports,
    dialogsShown,
    sendMenuCommand(command) {
      if (menuClients.size === 0) pendingCommands.push(command);
      for (const client of menuClients) client.write(`data: ${JSON.stringify(command)}\n\n`);
    },
    calls,
    get menuLocale() {
      return menuLocale;
    },
    storage,
    async close() {
      for (const client of menuClients) client.end();
      server.closeAllConnections();
      await new Promise<void>((resolveClose) => server.close(() => resolveClose()));
      storage.close();
      if (tempFolder) rmSync(tempFolder, { recursive: true, force: true });
    },
  };
}
