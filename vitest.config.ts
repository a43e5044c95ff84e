import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // the browser suite builds the app and drives Chromium: `npm run test:e2e` (test/e2e/vitest.config.ts)
    exclude: ['test/e2e/**', 'node_modules/**'],
    testTimeout: 60_000,
  },
});
