/**
 * The preload: `window.memplan`, one verb per IPC channel (`memplan.plans.save(args)` -> 'plans:save'), plus the
 * application menu's commands. It exposes verbs, never ipcRenderer, and imports only the channel names
 * (electron/common/channels.ts): a sandboxed preload is one CommonJS file that cannot require npm packages, so zod
 * stays in the main process, which validates every argument.
 */
import { contextBridge, ipcRenderer, type IpcRendererEvent } from 'electron';
import { INVOKE_CHANNELS, MENU_COMMAND_CHANNEL, MENU_COMMANDS, type IpcAnswer, type MenuCommand } from '../common/channels.ts';
import type { MemplanApi } from '../common/ipc.ts';

async function invoke(channel: string, args: unknown): Promise<unknown> {
  const answer = (await ipcRenderer.invoke(channel, args)) as IpcAnswer<unknown>;
  if (!answer.ok) throw new Error(answer.error.message);
  return answer.value;
}

const api: Record<string, Record<string, unknown>> = {};
for (const channel of INVOKE_CHANNELS) {
  const [group, verb] = channel.split(':') as [string, string];
  (api[group] ??= {})[verb] = (args?: unknown) => invoke(channel, args);
}
api['menu'] = {
  onCommand(listener: (command: MenuCommand) => void): () => void {
    const forward = (_event: IpcRendererEvent, command: unknown) => {
      if ((MENU_COMMANDS as readonly unknown[]).includes(command)) listener(command as MenuCommand);
    };
    ipcRenderer.on(MENU_COMMAND_CHANNEL, forward);
    return () => void ipcRenderer.removeListener(MENU_COMMAND_CHANNEL, forward);
  },
};

contextBridge.exposeInMainWorld('memplan', api as unknown as MemplanApi);
