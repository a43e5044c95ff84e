/**
 * One call of one channel, whoever carries it (ipcMain or the test bridge): check the sender, parse the arguments
 * with the contract's schema, run the handler, check its answer against the contract, and wrap it all in an
 * IpcAnswer. Errors become `{ok: false, error: {code, message}}` with a message that names the channel and the
 * field (`plans.save: name: must not be empty`).
 */
import { contract, describeIssues, INVOKE_CHANNELS, type Handlers, type InvokeChannel, type IpcAnswer, type IpcError } from '../../common/ipc.ts';

export function isInvokeChannel(channel: string): channel is InvokeChannel {
  return (INVOKE_CHANNELS as readonly string[]).includes(channel);
}

/** `plans:save` -> `plans.save`, as the renderer calls it. */
function verbName(channel: string): string {
  return channel.replace(':', '.');
}

function failure(code: IpcError['code'], message: string): IpcAnswer<never> {
  return { ok: false, error: { code, message } };
}

export interface Sender {
  /** The URL of the frame that sent the call (Electron: event.senderFrame.url; the bridge: the request's Origin). */
  url: string | undefined;
}

export async function dispatch(handlers: Handlers, channel: string, rawArgs: unknown, sender: Sender, isTrustedSender: (url: string | undefined) => boolean): Promise<IpcAnswer<unknown>> {
  if (!isInvokeChannel(channel)) return failure('invalid_args', `unknown channel ${JSON.stringify(channel)}`);
  if (!isTrustedSender(sender.url)) return failure('refused', `${verbName(channel)}: refused a call from ${JSON.stringify(sender.url ?? 'an unknown sender')}: only the app's own page may call it`);
  const definition = contract[channel];
  const args = definition.args.safeParse(rawArgs);
  if (!args.success) return failure('invalid_args', `${verbName(channel)}: ${describeIssues(args.error)}`);
  let value: unknown;
  try {
    value = await (handlers[channel] as (args: unknown) => unknown)(args.data);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    const known = code === 'not_found' || code === 'invalid_args' ? code : 'failed';
    return failure(known, `${verbName(channel)}: ${(error as Error).message ?? String(error)}`);
  }
  const checked = definition.result.safeParse(value);
  if (!checked.success) return failure('failed', `${verbName(channel)}: its answer does not match the IPC contract: ${describeIssues(checked.error)}`);
  return { ok: true, value: checked.data };
}
