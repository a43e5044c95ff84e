/// <reference lib="dom" />
// Code inside page.evaluate runs in the page: the DOM types describe it.
/**
 * The advice under a result ends with what is not advised and why (the engine's `not_applicable`): for GPT-2 in
 * AMP bf16 (advised: bf16 weights, among others), autocast bf16 because the plan already trains in reduced
 * precision, and LoRA because it is advised for
 * the model types PEFT has defaults for, GPT-2 not among them; after a search, the advice for a larger batch too.
 * In English and in Chinese. For a plan that runs out of memory, each change says what it needs with no cap where it
 * still runs out, and its peak where it fits (first).
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

describe('what is not advised', () => {
  test('each change the engine did not advise, with its reason, in English and in Chinese', async () => {
    const { page } = app;
    await page.locator('button[data-mode="preset"]').click();
    await page.locator('#preset').selectOption('gpt2');
    await page.locator('#tab-training').click();
    await page.locator('#batch-size').fill('8');
    await page.locator('input[name="precision"][value="amp_bf16"]').check();
    await waitForResult(page);

    const list = page.locator('[data-testid="not-advised"]');
    await list.waitFor({ state: 'attached', timeout: 60_000 });
    const item = (id: string) => page.locator(`[data-testid="not-advised-${id}"]`);
    expect(await item('amp_bf16').getAttribute('data-reason')).toBe('already_set');
    expect(await item('amp_bf16').textContent()).toContain('the plan already trains in reduced precision');
    expect(await item('sdpa').getAttribute('data-reason')).toBe('already_set');
    // bf16 weights save GPT-2's fp32 weights, gradients and AdamW state: advised, in words
    await expect.poll(() => page.locator('[data-testid="advice-bf16_weights"]').textContent().catch(() => ''), { timeout: 60_000 }).toContain('Load the weights in bf16 and train without autocast');
    expect(await page.locator('[data-testid="advice-bf16_weights"]').textContent()).toContain('from_pretrained(..., dtype=torch.bfloat16)');
    // GPT-2 has PEFT's default target (c_attn), and the plan fits: LoRA changes what is trained, so not advised
    expect(await item('lora').getAttribute('data-reason')).toBe('plan_fits');
    expect((await item('lora').textContent())?.trim()).toContain('the plan fits as it is; LoRA changes what is trained, so it is advised only for a full fine-tune that does not fit');
    // Advised changes are not listed again as not advised.
    const advised = await page.locator('[data-testid="advice"] ol > li').evaluateAll((lis) => lis.map((li) => li.getAttribute('data-testid')!.replace('advice-', '')));
    expect(advised.length).toBeGreaterThan(0);
    for (const id of advised) expect(await item(id).count()).toBe(0);
    await list.scrollIntoViewIfNeeded();
    await screenshot(page, 'advice-not-advised-en');

    // After a search, the advice for a larger batch ends the same way.
    await page.locator('[data-testid="find-max-batch"]').click();
    const batchList = page.locator('[data-testid="max-batch"] [data-testid="not-advised"]');
    await batchList.waitFor({ state: 'attached', timeout: 180_000 });
    expect(await batchList.locator('[data-testid="not-advised-amp_bf16"]').getAttribute('data-reason')).toBe('already_set');
    expect(await batchList.locator('li').count()).toBeGreaterThan(1);
    await batchList.scrollIntoViewIfNeeded();
    await screenshot(page, 'advice-not-advised-max-batch-en');
    await page.locator('#view-memory').click();

    await page.locator('[data-testid="settings"]').click();
    await page.locator('[data-locale="zh-CN"]').click();
    await page.keyboard.press('Escape');
    await expect.poll(() => list.locator('h4').textContent()).toBe('未列入建议的改动');
    expect(await item('amp_bf16').textContent()).toContain('方案已经用低精度训练');
    expect(await item('lora').textContent()).toContain('方案本身放得下；LoRA 改变的是训练哪些参数，只在全参数微调放不下时才建议');
    await list.scrollIntoViewIfNeeded();
    await screenshot(page, 'advice-not-advised-zh-CN');
    await page.locator('#view-max-batch').click();
    await expect.poll(() => batchList.locator('h4').textContent()).toBe('未列入建议的改动');
    await batchList.scrollIntoViewIfNeeded();
    await screenshot(page, 'advice-not-advised-max-batch-zh-CN');

    // A plan that already does everything memplan would try: no advice, and the list says why.
    await page.locator('#view-memory').click();
    await page.locator('#batch-size').fill('1');
    await page.locator('#checkpointing button', { hasText: '非重入' }).click();
    await page.locator('#optimizer-impl').selectOption('fused');
    // bf16 weights too: memplan advises them for an autocast bf16 plan
    await page.locator('input[name="precision"][value="bf16"]').check();
    await page.locator('#tab-gpu').click();
    await page.locator('label.check input[type="checkbox"]').check();
    await waitForResult(page);
    await expect.poll(() => page.locator('[data-testid="advice"] .none').textContent().catch(() => ''), { timeout: 60_000 }).toBe('对这个方案，memplan 尝试的改动都不能节省显存。');
    expect(await page.locator('[data-testid="advice"] ol > li').count()).toBe(0);
    expect(await item('accumulation').getAttribute('data-reason')).toBe('batch_of_one');
    expect(await item('checkpointing').getAttribute('data-reason')).toBe('already_set');
    expect(await item('bf16_weights').getAttribute('data-reason')).toBe('already_set');
    expect(await item('bf16_weights').textContent()).toContain('方案的权重已经是 16 位（bf16 或 fp16）');
    await list.scrollIntoViewIfNeeded();
    await screenshot(page, 'advice-none-zh-CN');
    expect(app.errors).toEqual([]);
  });

  test('for a plan that runs out of memory: each change measured by its peak where it fits, by what it needs with no cap where it still runs out', async () => {
    // GPT-2 medium in fp32 at 32 x 1024 on the H100 needs 118 GiB: checkpointing and accumulation fit, bf16
    // autocast still runs out (Note [Advice for a plan that does not fit])
    for (const [locale, needs, fits, name] of [
      ['en-US', /still out of memory\s*needs [\d.]+\sGiB reserved with no cap/, /then fits\s*peak reserved [\d.]+\sGiB/, 'advice-oom-needs-en'],
      ['zh-CN', /仍然显存不足\s*不设上限时需要预留 [\d.]+\sGiB/, /改后放得下\s*峰值预留 [\d.]+\sGiB/, 'advice-oom-needs-zh-CN'],
    ] as const) {
      const window = await launchApp({ served: app.served, locale });
      try {
        const { page } = window;
        await page.locator('button[data-mode="preset"]').click();
        await page.locator('#preset').selectOption('gpt2-medium');
        await page.locator('#tab-training').click();
        await page.locator('#batch-size').fill('32');
        await page.locator('#seq-len').fill('1024');
        await page.locator('input[name="precision"][value="fp32"]').check();
        await waitForResult(page);
        const advice = (id: string) => page.locator(`[data-testid="advice-${id}"]`);
        await expect.poll(() => advice('amp_bf16').textContent().catch(() => ''), { timeout: 60_000 }).toMatch(needs);
        expect(await advice('checkpointing').textContent()).toMatch(fits);
        // the fitting change first, then by what each saves (once all have come: they stream in as simulated)
        await page.locator('[data-testid="advice"][data-pending="false"]').waitFor({ timeout: 60_000 });
        const order = await page.locator('[data-testid="advice"] ol > li').evaluateAll((lis) => lis.map((li) => li.getAttribute('data-testid')));
        expect(order[0]).toBe('advice-checkpointing');
        await advice('amp_bf16').scrollIntoViewIfNeeded();
        await screenshot(page, name);
        expect(window.errors).toEqual([]);
      } finally {
        await window.close();
      }
    }
  });
});
