/**
 * The charts' interactions in Chromium, on the harness (start it first, see shoot.ts): wheel zoom enables Reset
 * and Reset restores the view; switching <html data-theme> recolours the chart without re-creating it; a
 * comparison's charts zoom together. Screenshots of each state go to OUT_DIR.
 * `node_modules/.bin/node test/renderer/harness/interact.ts OUT_DIR`
 */
import { mkdirSync } from 'node:fs';
import { chromium } from 'playwright-core';

const out = process.argv[2] ?? '/tmp/mp/shots';
mkdirSync(out, { recursive: true });
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium' });
const page = await browser.newPage({ viewport: { width: 1240, height: 900 } });
page.on('pageerror', (e) => console.log('pageerror', e.message));
const check = (what: string, ok: boolean) => {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) process.exitCode = 1;
};

await page.goto('http://127.0.0.1:5199/?view=simulate&key=gpt2&theme=light');
await page.waitForSelector('body[data-ready="1"]', { state: 'attached' });
const card = page.getByTestId('timeline-card');
await card.scrollIntoViewIfNeeded();
const canvas = card.locator('canvas');
const reset = card.getByRole('button', { name: 'Reset zoom' });
check('reset is disabled before zooming', await reset.isDisabled());
const box = (await canvas.boundingBox())!;
await page.mouse.move(box.x + box.width * 0.45, box.y + box.height / 2);
for (let i = 0; i < 6; i++) await page.mouse.wheel(0, -200);
await page.waitForTimeout(200);
check('wheel zoom enables reset', await reset.isEnabled());
await card.screenshot({ path: `${out}/interact-zoomed.png` });
await reset.click();
check('reset disables itself', await reset.isDisabled());
// drag a range to zoom
await page.mouse.move(box.x + box.width * 0.3, box.y + box.height / 2);
await page.mouse.down();
await page.mouse.move(box.x + box.width * 0.5, box.y + box.height / 2, { steps: 6 });
await page.mouse.up();
await page.waitForTimeout(200);
check('drag zoom enables reset', await reset.isEnabled());
await reset.click();

// the colour near the top of the timeline's canvas (the page's DOM types are not in the Node tsconfig: a string)
const pixel = async () =>
  page.evaluate<number>(`(() => {
    const c = document.querySelector('[data-testid="timeline-card"] canvas');
    const d = c.getContext('2d').getImageData(Math.round(c.width * 0.5), Math.round(c.height * 0.05), 1, 1).data;
    return d[0] + d[1] + d[2];
  })()`);
const light = await pixel();
await page.evaluate(`document.documentElement.dataset.theme = 'dark'`);
await page.waitForTimeout(300);
const dark = await pixel();
check(`data-theme=dark recolours the chart (${light} -> ${dark})`, dark < light);
await card.screenshot({ path: `${out}/interact-dark.png` });

await page.goto('http://127.0.0.1:5199/?view=compare&keys=gpt2,gpt2-fp32&theme=light');
await page.waitForSelector('body[data-ready="1"]', { state: 'attached' });
const charts = page.locator('.compare figure');
const first = (await charts.nth(0).locator('canvas').boundingBox())!;
await page.mouse.move(first.x + first.width * 0.5, first.y + first.height / 2);
for (let i = 0; i < 5; i++) await page.mouse.wheel(0, -200);
await page.waitForTimeout(300);
check('zooming one comparison chart zooms the other', await charts.nth(1).getByRole('button', { name: 'Reset zoom' }).isEnabled());
await page.locator('.compare').screenshot({ path: `${out}/interact-compare.png` });
await browser.close();
