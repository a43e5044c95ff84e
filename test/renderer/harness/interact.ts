/**
 * The charts' interactions in Chromium, on the harness (start it first, see shoot.ts): wheel zoom enables Reset
 * and Reset restores the view; switching <html data-theme> recolours the chart without re-creating it; a
 * comparison's charts zoom together; at the boundary (make-results.ts' bert-unstable, llama-none, llama-oom) the
 * unstable region is shaded, named and explained, a plan that fits nowhere says what it needs and where it fits, an
 * out-of-memory simulation what it needs, and every answer what it assumes. Screenshots of each state go to OUT_DIR.
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

// BERT-large under 16 GiB: 44 runs out, 45-47 fit; the band, its legend entry and the sentence, the recommendation below
for (const locale of ['en', 'zh-CN']) {
  await page.goto(`http://127.0.0.1:5199/?view=maxbatch&key=bert-unstable&locale=${locale}&theme=light`);
  await page.waitForSelector('body[data-ready="1"]', { state: 'attached' });
  const curve = page.getByTestId('max-batch-curve');
  check(`${locale}: the curve shades 44-47`, (await curve.locator('figure').getAttribute('data-unstable')) === '44-47');
  check(`${locale}: the legend names the band`, (await curve.getByTestId('legend-unstable').textContent())?.trim() === (locale === 'en' ? 'Unstable region' : '不稳定区间'));
  const sentence = (await page.getByTestId('unstable-region').textContent()) ?? '';
  check(`${locale}: the sentence names the region and says the recommendation is below it`, locale === 'en' ? /between batch 44 and 47: 44 ran out of memory, yet the larger 45, 46, and 47 fit/.test(sentence) && /recommendation \(40\) stays below 44/.test(sentence) : /批量 44 到 47 之间/.test(sentence) && /推荐的批量（40）低于 44/.test(sentence) && !/。 /.test(sentence));
  check(`${locale}: high confidence on the H100`, (await page.getByTestId('confidence').getAttribute('data-level')) === 'high');
  await page.screenshot({ path: `${out}/interact-unstable-${locale}.png`, fullPage: true });
}
// Llama 3 8B on an RTX 4090: nothing fits; what batch 1 needs and the catalog GPUs it fits on
await page.goto('http://127.0.0.1:5199/?view=maxbatch&key=llama-none&locale=en&theme=light');
await page.waitForSelector('body[data-ready="1"]', { state: 'attached' });
check('nothing fits: what batch 1 reserves with no cap', /^With no cap, a batch of 1 reserves 61\.\d+\sGiB/.test(((await page.getByTestId('needed').textContent()) ?? '').trim()));
const fitsOn = await page.getByTestId('fits-on').locator('[data-gpu]').evaluateAll((els) => els.map((e) => e.getAttribute('data-gpu')));
check(`nothing fits: the GPUs it fits on (${fitsOn.join(', ')})`, fitsOn.includes('h100-sxm') && fitsOn.includes('h200') && !fitsOn.includes('rtx-4090'));
check('nothing fits: medium confidence off the H100', (await page.getByTestId('confidence').getAttribute('data-level')) === 'medium');
// the same plan simulated: out of memory, and what it needs
await page.goto('http://127.0.0.1:5199/?view=simulate&key=llama-oom&locale=zh-CN&theme=light');
await page.waitForSelector('body[data-ready="1"]', { state: 'attached' });
check('simulate out of memory: the bytes it needs', /^不设上限时，这个方案的峰值预留显存为 \d+\.\d+\sGiB：比这里 PyTorch 可用的多/.test(((await page.getByTestId('needed-bytes').textContent()) ?? '').trim()));
check('simulate: the caveats name the GPU as PyTorch prints it', ((await page.getByTestId('caveats').textContent()) ?? '').includes('NVIDIA GeForce RTX 4090'));
await browser.close();
