/**
 * The names of the IPC channels, without their schemas: the preload imports this file (and nothing that pulls in
 * zod, which a sandboxed preload could not load), the main process and the test bridge import ipc.ts, which checks
 * that both lists agree (`contract satisfies Record<InvokeChannel, ...>`).
 *
 * A channel is `group:verb`; the preload exposes it as `window.memplan.group.verb(args)`.
 */

/** Renderer -> main, answered (ipcRenderer.invoke / ipcMain.handle). */
export const INVOKE_CHANNELS = [
  'plans:list',
  'plans:get',
  'plans:save',
  'plans:rename',
  'plans:duplicate',
  'plans:delete',
  'plans:restore',
  'files:openText',
  'files:openBytes',
  'files:saveText',
  'files:saveBytes',
  'files:saveReport',
  'comparisons:list',
  'comparisons:get',
  'comparisons:save',
  'comparisons:delete',
  'comparisons:restore',
  'snapshots:attach',
  'snapshots:list',
  'snapshots:get',
  'snapshots:detach',
  'app:info',
  'app:setLocale',
] as const;

export type InvokeChannel = (typeof INVOKE_CHANNELS)[number];

/** Main -> renderer: an application-menu item was chosen; the payload is one of MENU_COMMANDS. */
export const MENU_COMMAND_CHANNEL = 'menu:command';

/**
 * What the application menu asks the renderer to do. The first six are the renderer's own keyboard shortcuts
 * (renderer/src/lib/shortcuts.ts): the menu shows their keys but leaves the keys to the renderer.
 */
export const MENU_COMMANDS = [
  'new',
  'save',
  'save-as',
  'simulate',
  'max-batch',
  'search',
  'open-plan',
  'export-plan',
  'export-timeline-csv',
  'export-chart-png',
  'export-report',
  'import-hf-config',
  'open-snapshot',
  'toggle-theme',
  'locale-system',
  'locale-en',
  'locale-zh-CN',
] as const;

export type MenuCommand = (typeof MENU_COMMANDS)[number];

/** `plans:list` -> ['plans', 'list']. */
export function channelVerb(channel: InvokeChannel): [group: string, verb: string] {
  const [group, verb] = channel.split(':') as [string, string];
  return [group, verb];
}

/**
 * Every invoke channel answers with this envelope rather than a rejected promise: Electron rewrites a handler's
 * thrown error as "Error invoking remote method 'plans:save': Error: ...", and the preload (or the test bridge's
 * client) turns `ok: false` back into an Error carrying `message` only.
 */
export type IpcAnswer<T> = { ok: true; value: T } | { ok: false; error: IpcError };

export interface IpcError {
  /** invalid_args: the arguments failed the channel's schema (message names the field); refused: the sender is not
   * the app's own page; not_found: no such plan (or it is deleted); failed: anything else (storage, file system). */
  code: 'invalid_args' | 'refused' | 'not_found' | 'failed';
  message: string;
}
