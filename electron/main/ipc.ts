/**
 * Registers one ipcMain handler per channel of the contract. The sender is the frame that called: it must be the
 * top frame of a page of app://memplan (or, in development, the dev server the window loaded); dispatch refuses
 * anything else before parsing the arguments.
 */
import { ipcMain, type IpcMainInvokeEvent } from 'electron';
import { INVOKE_CHANNELS, type Handlers } from '../common/ipc.ts';
import { dispatch } from './handlers/dispatch.ts';

function senderUrl(event: IpcMainInvokeEvent): string | undefined {
  const frame = event.senderFrame;
  return frame && frame.parent === null ? frame.url : undefined;
}

export function setupIpc(handlers: Handlers, isTrustedSender: (url: string | undefined) => boolean): void {
  for (const channel of INVOKE_CHANNELS) {
    ipcMain.handle(channel, (event, args: unknown) => dispatch(handlers, channel, args, { url: senderUrl(event) }, isTrustedSender));
  }
}
