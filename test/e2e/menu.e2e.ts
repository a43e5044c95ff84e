/// <reference lib="dom" />
// Code inside page.evaluate runs in the page: the DOM types describe it.
/**
 * The application menu's commands reach the page (the bridge sends them as the main process would): import a
 * config.json through the open dialog, export the plan through the save dialog, save, toggle the theme.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { launchApp, resultNumbers, waitForResult, type App } from './harness.ts';
import type { ServedWithBridge } from './serve.ts';

let app: App;
let bridge: ServedWithBridge['bridge'];
beforeAll(async () => {
  app = await launchApp();
  bridge = (app.served as ServedWithBridge).bridge;
});
afterAll(async () => {
  await app?.close();
});

const GPT2_CONFIG = JSON.stringify({ model_type: 'gpt2', architectures: ['GPT2LMHeadModel'], n_layer: 6, n_embd: 512, n_head: 8, vocab_size: 50257, n_positions: 1024 }, null, 2);

describe('menu commands', () => {
  test('import a config.json, export the plan, save, toggle the theme', async () => {
    const { page } = app;
    bridge.queueOpenFile({ name: 'config.json', text: GPT2_CONFIG });
    bridge.sendMenuCommand('import-hf-config');
    await expect.poll(() => page.locator('#hf-config').inputValue().catch(() => '')).toBe(GPT2_CONFIG);
    await waitForResult(page);
    expect((await resultNumbers(page)).peakAllocated).toBeGreaterThan(0);

    await page.locator('#plan-title').fill('Small GPT-2 from config.json');
    bridge.sendMenuCommand('export-plan');
    await expect.poll(() => bridge.savedFiles.length).toBe(1);
    const exported = JSON.parse(bridge.savedFiles[0]!.text) as Record<string, unknown>;
    expect(exported.format).toBe('memplan.plan');
    expect(exported.name).toBe('Small GPT-2 from config.json');
    expect((exported.model as { hf_config: { n_layer: number } }).hf_config.n_layer).toBe(6);

    bridge.sendMenuCommand('save');
    await page.locator('.plan-item[data-plan-name="Small GPT-2 from config.json"]').waitFor();

    const before = await page.evaluate(() => document.documentElement.dataset.theme ?? 'system');
    bridge.sendMenuCommand('toggle-theme');
    await expect.poll(() => page.evaluate(() => document.documentElement.dataset.theme ?? 'system')).not.toBe(before);
    expect(app.errors).toEqual([]);
  });

  test('the language is chosen from the menu, remembered, and the menu follows it', async () => {
    const { page } = app;
    // The page reports its language as it starts: English here, the system's, nothing chosen.
    await expect.poll(() => bridge.menuLocale).toEqual({ locale: 'en', choice: 'system' });
    bridge.sendMenuCommand('locale-zh-CN');
    await expect.poll(() => page.locator('#tab-model').textContent()).toContain('模型');
    await expect.poll(() => bridge.menuLocale).toEqual({ locale: 'zh-CN', choice: 'zh-CN' });
    await page.reload();
    await page.locator('#plan-title').waitFor();
    expect(await page.locator('#tab-model').textContent()).toContain('模型');
    await expect.poll(() => bridge.menuLocale).toEqual({ locale: 'zh-CN', choice: 'zh-CN' });
    bridge.sendMenuCommand('locale-system');
    await expect.poll(() => page.locator('#tab-model').textContent()).toContain('Model');
    await expect.poll(() => bridge.menuLocale).toEqual({ locale: 'en', choice: 'system' });
    expect(app.errors).toEqual([]);
  });
});
