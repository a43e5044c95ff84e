/**
 * The renderer is served from app://memplan/ (not file://, whose pages share one origin with every local file):
 * a standard, secure scheme, so the page has an origin, module scripts and workers load, and the CSP's 'self'
 * means the app's own files. What a path resolves to and the headers are in security/renderer-files.ts.
 */
import { readFile } from 'node:fs/promises';
import { protocol } from 'electron';
import { APP_HOST, APP_SCHEME } from './security/origin.ts';
import { rendererResponse } from './security/renderer-files.ts';

/** Before app ready: the scheme's privileges. */
export function registerAppScheme(): void {
  protocol.registerSchemesAsPrivileged([{ scheme: APP_SCHEME, privileges: { standard: true, secure: true, supportFetchAPI: true, codeCache: true } }]);
}

export function setupProtocol(rendererDir: string): void {
  protocol.handle(APP_SCHEME, async (request) => {
    const url = new URL(request.url);
    if (url.host !== APP_HOST || (request.method !== 'GET' && request.method !== 'HEAD')) return new Response('not found', { status: 404 });
    const answer = await rendererResponse(rendererDir, url.pathname, readFile);
    return new Response(request.method === 'HEAD' ? null : (answer.body as ConstructorParameters<typeof Response>[0]), { status: answer.status, headers: answer.headers });
  });
}
