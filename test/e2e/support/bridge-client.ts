/**
 * `window.memplan` for the renderer in plain Chromium, over the test bridge (bridge.ts): the same verbs as the
 * preload (electron/preload/preload.ts), each a `POST /ipc/<channel>` answered by the main process's own handlers,
 * and the menu's commands as server-sent events from `/menu-events`. Injected with `page.addInitScript(
 * bridge.clientScript)` (or `page.addInitScript(installMemplanClient, channels)`); it must not import anything:
 * Playwright sends the function's source to the page.
 *
 * Arguments are structured-cloned first, as Electron's IPC does (a proxy or a function is refused the same way),
 * then sent as JSON: typed arrays as plain arrays (as SQLite stores them), an ArrayBuffer (a chart's PNG) as
 * `{ $bytes_base64 }`; an ArrayBuffer answer (a snapshot's bytes) comes back as `{ $bytes_base64 }` and is turned
 * back into an ArrayBuffer.
 */
export function installMemplanClient(channels: readonly string[]): void {
  const toBase64 = (buffer: ArrayBuffer): string => {
    const bytes = new Uint8Array(buffer);
    let binary = '';
    for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
    return btoa(binary);
  };
  const replacer = (_key: string, value: unknown): unknown =>
    value instanceof ArrayBuffer ? { $bytes_base64: toBase64(value) } : ArrayBuffer.isView(value) && !(value instanceof DataView) ? Array.from(value as unknown as ArrayLike<number>) : value;
  const reviver = (_key: string, value: unknown): unknown => {
    if (value && typeof value === 'object' && typeof (value as { $bytes_base64?: unknown }).$bytes_base64 === 'string') {
      const binary = atob((value as { $bytes_base64: string }).$bytes_base64);
      const bytes = new Uint8Array(binary.length);
      for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
      return bytes.buffer;
    }
    return value;
  };
  const invoke = async (channel: string, args: unknown): Promise<unknown> => {
    // Electron's IPC structured-clones the arguments: what it cannot clone (a Svelte $state proxy, a function)
    // fails here too, before JSON would quietly flatten it.
    const cloned = structuredClone(args);
    const response = await fetch(`/ipc/${channel}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(cloned ?? null, replacer) });
    const answer = JSON.parse(await response.text(), reviver) as { ok: true; value: unknown } | { ok: false; error: { message: string } };
    if (!answer.ok) throw new Error(answer.error.message);
    return answer.value;
  };
  const api: Record<string, Record<string, unknown>> = {};
  for (const channel of channels) {
    const [group, verb] = channel.split(':') as [string, string];
    (api[group] ??= {})[verb] = (args?: unknown) => invoke(channel, args);
  }
  const listeners = new Set<(command: string) => void>();
  let events: EventSource | null = null;
  api['menu'] = {
    onCommand(listener: (command: string) => void): () => void {
      listeners.add(listener);
      if (!events) {
        events = new EventSource('/menu-events');
        events.onmessage = (event) => {
          for (const l of listeners) l(JSON.parse(event.data as string) as string);
        };
      }
      return () => {
        listeners.delete(listener);
      };
    },
  };
  Object.defineProperty(globalThis, 'memplan', { value: Object.freeze(api), writable: false, configurable: false });
}
