/**
 * The browser end-to-end suite: Debian's Chromium (playwright-core) drives the built renderer (out/renderer),
 * served with the main process's handlers over the test bridge. One fork, one file at a time, long timeouts.
 */
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    root: new URL('../..', import.meta.url).pathname,
    include: ['test/e2e/**/*.e2e.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
    fileParallelism: false,
    maxWorkers: 1,
    reporters: ['default'],
  },
});
