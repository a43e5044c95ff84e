/**
 * The app's own origin and what may call the main process. The renderer is served from `app://memplan/` (a
 * standard, secure scheme registered in protocol.ts); an IPC call from any other URL (a page the window was
 * somehow navigated to, a devtools-opened frame) is refused.
 */
export const APP_SCHEME = 'app';
export const APP_HOST = 'memplan';
export const APP_ORIGIN = `${APP_SCHEME}://${APP_HOST}`;
export const APP_ENTRY_URL = `${APP_ORIGIN}/index.html`;

/** True for a URL of the app's own page: `app://memplan/...`. */
export function isAppUrl(url: string | undefined): boolean {
  if (!url) return false;
  try {
    const parsed = new URL(url);
    return parsed.protocol === `${APP_SCHEME}:` && parsed.host === APP_HOST && parsed.username === '' && parsed.password === '';
  } catch {
    return false;
  }
}
