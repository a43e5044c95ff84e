/**
 * The `memplan` command's build (`npm run build`, run by `npm ci`): the CLI and its trial worker bundled into
 * dist/cli/, zod and fflate included, so a `memplan` process loads a few bundles instead of compiling ~90 modules
 * (issue #15; `npm run bench` times it). The cuDNN workspace table is read at run time from dist/resources/, where
 * the build copies it (cli/gpus.ts: `../resources/` beside the command); the GPU catalog is bundled.
 */
import { cpSync } from 'node:fs';
import { defineConfig } from 'rolldown';

export default defineConfig({
  input: { memplan: 'cli/memplan.ts', 'engine-worker': 'cli/engine-worker.ts' },
  platform: 'node',
  output: {
    dir: 'dist/cli',
    format: 'esm',
    chunkFileNames: '[name].js',
    cleanDir: true,
    // The engine with zod and fflate, and the CLI's modules both the command and its worker import.
    advancedChunks: {
      groups: [
        { name: 'engine', test: /[\\/](engine|node_modules)[\\/]/ },
        { name: 'cli-shared', test: /[\\/]cli[\\/]/, minShareCount: 2 },
      ],
    },
  },
  plugins: [
    {
      name: 'memplan-resources',
      writeBundle() {
        cpSync('resources/cudnn-workspaces-h100.json.gz', 'dist/resources/cudnn-workspaces-h100.json.gz');
      },
    },
  ],
});
