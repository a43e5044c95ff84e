/**
 * One build for the three runtimes of the app (electron-vite): the main process (Node, ESM), the preload
 * (CommonJS: a sandboxed preload cannot load ES modules) and the renderer (Svelte, served from app://).
 * The renderer's own settings live in renderer/vite.config.ts, which the e2e tests build as well.
 */
import { resolve } from 'node:path';
import { defineConfig, mergeConfig } from 'electron-vite';
import rendererConfig from './renderer/vite.config.ts';

const ROOT = import.meta.dirname;

export default defineConfig({
  main: {
    build: {
      outDir: 'out/main',
      // better-sqlite3 (a native module) stays in node_modules; zod and fflate are bundled, so the packaged app
      // ships them inside index.js rather than as node_modules (build/electron-builder.yml leaves those out).
      externalizeDeps: { exclude: ['zod', 'fflate'] },
      rolldownOptions: { input: { index: resolve(ROOT, 'electron/main/main.ts') } },
    },
  },
  preload: {
    build: {
      outDir: 'out/preload',
      // Minified: the preload is parsed in every page load and holds only the channel names and the verbs.
      minify: true,
      rolldownOptions: {
        input: { preload: resolve(ROOT, 'electron/preload/preload.ts') },
        output: { format: 'cjs', entryFileNames: '[name].cjs' },
      },
    },
  },
  // electron-vite bundles this file (and what it imports) into one file at the root before running it, so
  // renderer/vite.config.ts's import.meta.dirname is the root here: its paths are set again from the root.
  renderer: mergeConfig(rendererConfig, {
    root: resolve(ROOT, 'renderer'),
    build: { outDir: resolve(ROOT, 'out/renderer'), rolldownOptions: { input: { index: resolve(ROOT, 'renderer/index.html') } } },
  }),
});
