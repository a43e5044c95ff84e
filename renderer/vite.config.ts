/**
 * The renderer's build (Vite 8, Rolldown inside). electron.vite.config.ts imports this as its renderer section and
 * the e2e suite serves what it writes, so it stays a plain UserConfig: root renderer/, output out/renderer/,
 * relative asset paths (the app is served from app://, the tests from http://127.0.0.1), module workers.
 */
import { resolve } from 'node:path';
import { svelte } from '@sveltejs/vite-plugin-svelte';
import type { UserConfig } from 'vite';

const root = import.meta.dirname;

const config: UserConfig = {
  root,
  base: './',
  plugins: [svelte({ configFile: false })],
  worker: { format: 'es' },
  build: {
    outDir: resolve(root, '../out/renderer'),
    emptyOutDir: true,
    target: 'chrome140',
    chunkSizeWarningLimit: 2048,
    rolldownOptions: { input: { index: resolve(root, 'index.html') } },
  },
  server: { fs: { allow: [resolve(root, '..')] } },
};

export default config;
