/// <reference lib="dom" />
// Code inside page.evaluate runs in the page: the DOM types describe it.
/**
 * Chinese and the themes: the window follows the system's language, switches to Simplified Chinese from the
 * settings, stays in it after a reload; light and dark themes. Each main screen is saved as a PNG, in English
 * and Chinese, light and dark (look at them: `test/e2e/screenshots/`).
 */
import { afterAll, describe, expect, test } from 'vitest';
import { launchApp, screenshot, waitForResult, type App } from './harness.ts';

const opened: App[] = [];
afterAll(async () => {
  for (const app of opened) await app.close();
});

async function open(options: Parameters<typeof launchApp>[0]): Promise<App> {
  const app = await launchApp(options);
  opened.push(app);
  return app;
}

/** The default plan with a few plans saved, the state a returning user sees. */
async function withSavedPlans(app: App): Promise<void> {
  const { page } = app;
  for (const [preset, name] of [
    ['llama-3.2-1b', 'Llama 3.2 1B · bs 8'],
    ['resnet50', 'ResNet-50 · ImageNet 224 px'],
    ['gpt2', 'GPT-2 · bf16 baseline'],
  ] as const) {
    await page.locator('#tab-model').click();
    await page.locator('button[data-mode="preset"]').click();
    await page.locator('#preset').selectOption(preset);
    await page.locator('#plan-title').fill(name);
    await waitForResult(page);
    await page.keyboard.press('Control+s');
    await page.locator('.plan-item', { hasText: name }).waitFor();
    await page.locator('#plan-title').focus();
    await page.keyboard.press('Control+n');
  }
  await page.locator('.plan-item', { hasText: 'GPT-2' }).locator('.open').click();
  await waitForResult(page);
}

describe('languages and themes', () => {
  test('English, light and dark', async () => {
    const app = await open({ locale: 'en-US', colorScheme: 'light' });
    await withSavedPlans(app);
    expect(await app.page.locator('#tab-model').textContent()).toContain('Model');
    await app.page.locator('#tab-training').click();
    await screenshot(app.page, 'main-en-light');
    await app.page.locator('[data-testid="settings"]').click();
    await app.page.locator('[data-theme-choice="dark"]').click();
    await app.page.locator('[data-testid="settings"]').click();
    await app.page.mouse.move(0, 0);
    await screenshot(app.page, 'main-en-dark');
    expect(app.errors).toEqual([]);
  });

  test('switched to Chinese from the settings, kept after a reload', async () => {
    const app = await open({ locale: 'en-US', colorScheme: 'light' });
    const { page } = app;
    await waitForResult(page);
    await page.locator('[data-testid="settings"]').click();
    await page.locator('[data-locale="zh-CN"]').click();
    await expect.poll(() => page.locator('[data-locale="zh-CN"]').getAttribute('aria-pressed'), { timeout: 10_000 }).toBe('true');
    await page.keyboard.press('Escape');
    await expect.poll(() => page.locator('#tab-model').textContent(), { timeout: 10_000 }).toContain('模型');
    expect(await page.locator('#tab-training').textContent()).toContain('训练');
    expect(await page.evaluate(() => document.documentElement.lang)).toBe('zh-CN');
    await page.reload();
    await page.locator('#plan-title').waitFor();
    expect(await page.locator('#tab-model').textContent()).toContain('模型');
    await waitForResult(page);
    // The result views speak Chinese too.
    expect(await page.locator('section.results').textContent()).toMatch(/峰值|显存/);
  });

  test('Chinese from the system language: every screen', async () => {
    const app = await open({ locale: 'zh-CN', colorScheme: 'light' });
    const { page } = app;
    await withSavedPlans(app);
    expect(await page.locator('#tab-model').textContent()).toContain('模型');
    await page.locator('#tab-training').click();
    await screenshot(page, 'main-zh-CN-light');

    await page.locator('#tab-training').click();
    await page.locator('#batch-size').fill('-2');
    await page.locator('[data-path="training.batch_size"] .issues').waitFor();
    await screenshot(page, 'bad-input-zh-CN');
    await page.locator('#batch-size').fill('8');
    await waitForResult(page);

    await page.locator('#tab-gpu').click();
    await page.keyboard.press('Control+b');
    await expect.poll(() => page.locator('section.results').getAttribute('data-search'), { timeout: 120_000 }).toBe('done');
    await screenshot(page, 'max-batch-zh-CN');

    await page.locator('[data-testid="settings"]').click();
    await page.locator('[data-theme-choice="dark"]').click();
    await page.keyboard.press('Escape');
    await page.locator('#view-memory').click();
    await page.locator('#tab-training').click();
    await screenshot(page, 'main-zh-CN-dark');

    await page.locator('#plan-title').focus();
    await page.keyboard.press('Control+n');
    await page.locator('#tab-model').click();
    await page.locator('button[data-mode="layers"]').click();
    await waitForResult(page);
    await screenshot(page, 'layer-list-zh-CN');

    // a pasted regression classifier: how memplan reads its head, and PyTorch's failure in bf16 beside the precision
    await page.locator('button[data-mode="hf_config"]').click();
    const regression = { model_type: 'bert', architectures: ['BertForSequenceClassification'], hidden_size: 256, num_hidden_layers: 2, num_attention_heads: 4, intermediate_size: 512, vocab_size: 30522, num_labels: 1 };
    await page.locator('#hf-config').fill(JSON.stringify(regression, null, 2));
    await page.locator('#tab-training').click();
    await page.locator('#seq-len').fill('128'); // BERT's 512 positions
    await waitForResult(page);
    await page.locator('#tab-model').click();
    await expect.poll(() => page.locator('.detected').textContent(), { timeout: 20_000 }).toContain('回归，1 个输出（MSELoss）');
    await screenshot(page, 'classifier-detected-zh-CN');
    await page.locator('#tab-training').click();
    await page.locator('input[name="precision"][value="bf16"]').check();
    const precision = page.locator('[data-path="training.precision"] .issues');
    await expect.poll(() => precision.textContent(), { timeout: 20_000 }).toContain('回归头（MSELoss）在 PyTorch 中会报错');
    await screenshot(page, 'regression-bf16-zh-CN');

    expect(app.errors).toEqual([]);
  });
});
