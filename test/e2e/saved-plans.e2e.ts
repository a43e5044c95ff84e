/// <reference lib="dom" />
// Code inside page.evaluate runs in the page: the DOM types describe it.
/**
 * Saved plans: two saved (Ctrl+S, then a changed copy), the app reloaded, one found by search, renamed in place,
 * deleted and brought back with Undo.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { launchApp, screenshot, waitForResult, type App } from './harness.ts';

let app: App;
beforeAll(async () => {
  app = await launchApp();
});
afterAll(async () => {
  await app?.close();
});

const items = (app: App) => app.page.locator('.plan-item');
const item = (app: App, name: string) => app.page.locator(`.plan-item[data-plan-name="${name}"]`);
const names = async (app: App) => (await items(app).locator('.title').allTextContents()).map((s) => s.trim());

describe('saved plans', () => {
  test('save two, reload, search, rename, delete and undo', async () => {
    const { page } = app;
    await page.locator('button[data-mode="preset"]').click();
    await page.locator('#preset').selectOption('gpt2-medium');
    await page.locator('#plan-title').fill('GPT-2 medium baseline');
    await page.locator('#tab-notes').click();
    await page.locator('#notes').fill('AMP bf16 on one H100, the run we measured in October');
    await page.locator('#tags').fill('baseline, gpt2');
    await page.locator('#tags').blur();
    await waitForResult(page);
    expect(await page.locator('[data-testid="save-state"]').textContent()).toContain('Unsaved');
    await page.keyboard.press('Control+s');
    await expect.poll(() => names(app)).toEqual(['GPT-2 medium baseline']);
    await expect.poll(() => page.locator('[data-testid="save-state"]').textContent()).toContain('Saved');

    // A second plan: checkpointing on, saved as a new plan under its own name.
    await page.locator('#tab-training').click();
    await page.locator('#checkpointing button', { hasText: 'Non-reentrant' }).click();
    await expect.poll(() => page.locator('[data-testid="save-state"]').textContent()).toContain('Unsaved');
    await page.locator('button', { hasText: 'Save as…' }).click();
    await expect.poll(() => items(app).count()).toBe(2);
    await page.locator('#plan-title').fill('GPT-2 medium, checkpointing');
    await page.locator('#tab-notes').click();
    await page.locator('#notes').fill('Activation checkpointing on every block');
    await page.keyboard.press('Control+s');
    await expect.poll(() => names(app)).toContain('GPT-2 medium, checkpointing');
    expect(await names(app)).toHaveLength(2);

    // Reload: both are still there (read back from storage).
    await page.reload();
    await page.locator('#plan-title').waitFor();
    await expect.poll(() => names(app)).toHaveLength(2);

    // Search by notes, then by tag, with the keyboard shortcut.
    await page.keyboard.press('Control+f');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('plan-search');
    await page.keyboard.type('october');
    await expect.poll(() => names(app)).toEqual(['GPT-2 medium baseline']);
    await page.locator('#plan-search').fill('checkpointing');
    await expect.poll(() => names(app)).toEqual(['GPT-2 medium, checkpointing']);
    await page.locator('#plan-search').fill('nothing like this');
    await expect.poll(() => page.locator('.sidebar .empty').textContent()).toContain('No plan matches');
    await page.locator('#plan-search').fill('');
    await expect.poll(() => names(app)).toHaveLength(2);

    // Open the first, then rename it in place.
    await item(app, 'GPT-2 medium baseline').locator('.open').click();
    await expect.poll(() => page.locator('#plan-title').inputValue()).toBe('GPT-2 medium baseline');
    await item(app, 'GPT-2 medium baseline').hover();
    await item(app, 'GPT-2 medium baseline').locator('button[aria-label^="Rename"]').click();
    await page.locator('.rename-input').fill('GPT-2 medium, bf16 baseline');
    await page.keyboard.press('Enter');
    await expect.poll(() => names(app)).toContain('GPT-2 medium, bf16 baseline');
    await expect.poll(() => page.locator('#plan-title').inputValue()).toBe('GPT-2 medium, bf16 baseline');

    // Delete the other, then Undo from the toast.
    const other = item(app, 'GPT-2 medium, checkpointing');
    await other.hover();
    await other.locator('button[aria-label^="Delete"]').click();
    await expect.poll(() => names(app)).toEqual(['GPT-2 medium, bf16 baseline']);
    const toast = page.locator('.toast', { hasText: 'Deleted' });
    await toast.waitFor();
    await screenshot(page, 'saved-plans-delete-undo-en', { keepToasts: true });
    await toast.locator('button', { hasText: 'Undo' }).click();
    await expect.poll(() => names(app)).toHaveLength(2);
    expect(await names(app)).toContain('GPT-2 medium, checkpointing');
    await page.locator('.toast', { hasText: 'Restored' }).waitFor();
    await screenshot(page, 'saved-plans-en');
    expect(app.errors).toEqual([]);
  });
});
