/**
 * The Content-Security-Policy of every page the app serves (app:// in Electron, the test bridge over http), sent
 * as a header with each response.
 *
 * - script-src 'self': the built renderer's module scripts only; no inline script, no eval.
 * - worker-src 'self': the engine's module Web Worker is a file of the build (Vite emits it under assets/).
 * - style-src 'self': the built stylesheet only. Svelte 5 (`style:` directives, `style={...}`) and Chart.js set
 *   styles through the CSSOM (element.style), which CSP allows; a static `style="..."` attribute in a template, or
 *   a <style> element injected at run time, would be refused and logged as a console error (checked: the built
 *   renderer, simulate and max-batch screens, under this policy in Chromium, logs none).
 * - img-src data: blob:: a chart saved as PNG (canvas.toDataURL) and shown or downloaded.
 * - connect-src 'self' data: blob:: fetch of the app's own files (the cuDNN workspace table) and of data the page
 *   already holds (an asset Vite inlined as a data: URL); no network.
 * - everything else 'none': no plugins, frames, forms, <base>.
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "worker-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "font-src 'self' data:",
  "connect-src 'self' data: blob:",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-src 'none'",
  "frame-ancestors 'none'",
  "object-src 'none'",
].join('; ');

/** Headers for every file the app serves. */
export function securityHeaders(): Record<string, string> {
  return {
    'Content-Security-Policy': CONTENT_SECURITY_POLICY,
    'X-Content-Type-Options': 'nosniff',
    'Cross-Origin-Opener-Policy': 'same-origin',
    'Referrer-Policy': 'no-referrer',
  };
}
