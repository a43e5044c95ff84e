/**
 * Which file of the built renderer (out/renderer) a request path names, for the app:// protocol (protocol.ts) and
 * the test bridge alike. Anything that would leave the renderer folder is refused: `..` segments (also encoded as
 * %2e%2e or %2f), backslashes, NUL bytes. `/` is index.html.
 */
import { extname, resolve, sep } from 'node:path';
import { securityHeaders } from './csp.ts';

export const MIME_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.woff': 'font/woff',
  '.ttf': 'font/ttf',
  '.wasm': 'application/wasm',
  '.gz': 'application/gzip',
  '.txt': 'text/plain; charset=utf-8',
};

export type RendererFile = { ok: true; path: string; mime: string } | { ok: false; status: 400 | 403; reason: string };

/** Resolves a URL's pathname (still percent-encoded, as `new URL(...).pathname` gives it) inside `rendererDir`. */
export function resolveRendererFile(rendererDir: string, pathname: string): RendererFile {
  let decoded: string;
  try {
    decoded = decodeURIComponent(pathname);
  } catch {
    return { ok: false, status: 400, reason: 'malformed percent-encoding' };
  }
  if (decoded.includes('\0')) return { ok: false, status: 400, reason: 'NUL byte in path' };
  if (decoded.includes('\\')) return { ok: false, status: 403, reason: 'backslash in path' };
  if (decoded.split('/').some((segment) => segment === '..')) return { ok: false, status: 403, reason: 'path leaves the renderer folder' };
  const root = resolve(rendererDir);
  const relative = decoded === '/' || decoded === '' ? 'index.html' : decoded.replace(/^\/+/, '');
  const path = resolve(root, relative);
  if (!path.startsWith(root + sep)) return { ok: false, status: 403, reason: 'path leaves the renderer folder' };
  return { ok: true, path, mime: MIME_TYPES[extname(path).toLowerCase()] ?? 'application/octet-stream' };
}

export interface RendererResponse {
  status: number;
  headers: Record<string, string>;
  body: Uint8Array | string;
}

/**
 * The answer to one GET of the renderer's files, the same for app:// (protocol.ts) and the test bridge: the file
 * with its type and the security headers (the CSP), or a refusal. `readFile` is fs.promises.readFile (Electron's
 * reads inside app.asar).
 */
export async function rendererResponse(rendererDir: string, pathname: string, readFile: (path: string) => Promise<Uint8Array>): Promise<RendererResponse> {
  const text = { 'Content-Type': 'text/plain; charset=utf-8' };
  const file = resolveRendererFile(rendererDir, pathname);
  if (!file.ok) return { status: file.status, headers: text, body: file.reason };
  let body: Uint8Array;
  try {
    body = await readFile(file.path);
  } catch {
    return { status: 404, headers: text, body: 'not found' };
  }
  return { status: 200, headers: { ...securityHeaders(), 'Content-Type': file.mime, 'Cache-Control': 'no-cache' }, body };
}
