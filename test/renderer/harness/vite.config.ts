/**
 * The result views' harness: the renderer's Vite settings, rooted here, serving the JSON results that
 * make-results.ts wrote (DATA_DIR, default /tmp/mp/data) under /data/.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { svelte } from '@sveltejs/vite-plugin-svelte';
import type { Plugin, UserConfig } from 'vite';

const dataDir = process.env.DATA_DIR ?? '/tmp/mp/data';

const serveData: Plugin = {
  name: 'harness-data',
  configureServer(server) {
    server.middlewares.use('/data', (req, res) => {
      try {
        const body = readFileSync(join(dataDir, (req.url ?? '').replace(/[^\w.-]/g, '')));
        res.setHeader('content-type', 'application/json');
        res.end(body);
      } catch {
        res.statusCode = 404;
        res.end();
      }
    });
  },
};

const config: UserConfig = {
  root: import.meta.dirname,
  plugins: [svelte(), serveData],
  server: { port: 5199, strictPort: true, fs: { allow: [resolve(import.meta.dirname, '../../..')] } },
  logLevel: 'warn',
};

export default config;
