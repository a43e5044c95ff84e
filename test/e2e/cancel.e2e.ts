/// <reference lib="dom" />
// Code inside page.evaluate runs in the page: the DOM types describe it.
/**
 * Cancelling a simulation that never pauses: a layer list of 80,000 small layers takes seconds in the engine worker as
 * one unit of work, so the worker cannot see a `cancel` until it is done. Cancel must still stop it at once: the
 * client replaces the worker when it has not answered within CANCEL_GRACE_MS (renderer/src/state/engine.svelte.ts,
 * Note [Cancel by replacing the worker]), and the next simulation answers from the fresh one, long before the
 * cancelled one would have ended. The same for an edit that supersedes the long simulation. The page counts the
 * workers it creates and terminates (a wrapper of `Worker` installed before the app's scripts), and the longest
 * main-thread task is measured and printed, as in max-batch.e2e.ts.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { launchApp, resultNumbers, ROOT, screenshot, waitForResult, type App } from './harness.ts';
import type { ServedWithBridge } from './serve.ts';

let app: App;
let bridge: ServedWithBridge['bridge'];

/**
 * Seconds of simulation with no pause inside: 80,000 layers, 3.5 s in Node here. 40,000 layers (once about 5 s) take
 * 1.6 s since earlier sessions' speed work, close enough to the test's 800 ms wait that on a busy machine the
 * simulation ended before Cancel (CI at 240c17d).
 */
const LONG_PLAN = {
  format: 'memplan.plan',
  version: 1,
  name: 'Long: 80,000 layers',
  model: { input_features: 64, layers: [{ type: 'repeat', count: 40000, layers: [{ type: 'linear', in_features: 64, out_features: 64 }, { type: 'relu' }] }] },
  training: { batch_size: 8, precision: 'fp32', optimizer: 'adamw' },
  gpu: { name: 'h100-sxm' },
};
const SMALL_TEXT = readFileSync(join(ROOT, 'examples/mlp-fp16.plan.json'), 'utf8');
const SMALL_PLAN = JSON.parse(SMALL_TEXT) as { training: { batch_size: number } };

async function openPlan(name: string, plan: unknown): Promise<void> {
  bridge.queueOpenFile({ name, text: JSON.stringify(plan) });
  bridge.sendMenuCommand('open-plan');
}

function resultState(): Promise<string | null> {
  return app.page.locator('section.results').getAttribute('data-result-state');
}

function workers(): Promise<{ created: number; terminated: number; longest: number; longTasks: number }> {
  return app.page.evaluate(() => {
    const w = window as unknown as { __workers: { created: number; terminated: number }; __longest: number; __longTasks: number };
    return { ...w.__workers, longest: w.__longest, longTasks: w.__longTasks };
  });
}

beforeAll(async () => {
  app = await launchApp();
  bridge = (app.served as ServedWithBridge).bridge;
  // Before the app's scripts: count the workers the page creates and terminates, and watch for long tasks.
  await app.context.addInitScript(() => {
    const w = window as unknown as { __workers: { created: number; terminated: number }; __longest: number; __longTasks: number };
    w.__workers = { created: 0, terminated: 0 };
    w.__longest = 0;
    w.__longTasks = 0;
    const Original = window.Worker;
    window.Worker = class extends Original {
      constructor(url: string | URL, options?: WorkerOptions) {
        super(url, options);
        w.__workers.created++;
      }
      override terminate(): void {
        w.__workers.terminated++;
        super.terminate();
      }
    };
    new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        w.__longTasks++;
        w.__longest = Math.max(w.__longest, entry.duration);
      }
    }).observe({ type: 'longtask' });
  });
  await app.page.reload();
  await app.page.locator('#plan-title').waitFor();
});
afterAll(async () => {
  await app?.close();
});

describe('cancelling a simulation', () => {
  test('a simulation of seconds with no pause stops on Cancel, and the next answers at once', async () => {
    const { page } = app;
    await openPlan('small.plan.json', SMALL_PLAN);
    await waitForResult(page);
    const small = await resultNumbers(page);
    const before = await workers();
    expect(before.created).toBeGreaterThanOrEqual(1);

    // The long plan: simulating, with Cancel beside it.
    await openPlan('long.plan.json', LONG_PLAN);
    await expect.poll(resultState, { timeout: 10_000 }).toBe('simulating');
    const cancel = page.locator('[data-testid="cancel-simulate"]');
    await cancel.waitFor();
    // Well inside the simulation: the worker is busy in it, deaf to messages.
    await page.waitForTimeout(800);
    const clicked = Date.now();
    await cancel.click();
    await expect.poll(resultState, { timeout: 2_000 }).not.toBe('simulating');
    const stoppedMs = Date.now() - clicked;
    await expect(cancel.count()).resolves.toBe(0);
    // The worker did not answer in time: it was terminated and a fresh one started (warm) in its place.
    await expect.poll(async () => (await workers()).terminated, { timeout: 2_000 }).toBe(before.terminated + 1);
    expect((await workers()).created).toBe(before.created + 1);
    await screenshot(page, 'cancel-simulation');

    // The next simulation answers from the fresh worker, long before the cancelled one would have ended.
    await openPlan('small-256.plan.json', { ...SMALL_PLAN, training: { ...SMALL_PLAN.training, batch_size: 256 } });
    await waitForResult(page, 10_000);
    const nextMs = Date.now() - clicked;
    const after = await resultNumbers(page);
    expect(after.peakReserved).toBeGreaterThan(0);
    expect(after.peakReserved).not.toBe(small.peakReserved);
    console.log(`cancel: the long simulation stopped ${stoppedMs} ms after Cancel; the next simulation answered ${nextMs} ms after it`);
    expect(nextMs).toBeLessThan(4_000);
  });

  test('an edit during a long simulation supersedes it without waiting for it', async () => {
    const { page } = app;
    const before = await workers();
    await openPlan('long.plan.json', LONG_PLAN);
    await expect.poll(resultState, { timeout: 10_000 }).toBe('simulating');
    await page.waitForTimeout(800);
    const edited = Date.now();
    await openPlan('small.plan.json', SMALL_PLAN);
    await waitForResult(page, 10_000);
    const answeredMs = Date.now() - edited;
    const after = await workers();
    expect(after.terminated).toBe(before.terminated + 1);
    expect(after.created).toBe(before.created + 1);
    console.log(`cancel: an edit during the long simulation answered after ${answeredMs} ms (the long one replaced, not awaited)`);
    expect(answeredMs).toBeLessThan(4_000);

    // The window stayed responsive throughout: no main-thread task near a freeze.
    console.log(`cancel: longest main-thread task ${after.longest.toFixed(0)} ms (${after.longTasks} tasks over 50 ms)`);
    expect(after.longest).toBeLessThan(1000);
    expect(app.errors).toEqual([]);
  });
});
