/**
 * Screenshots of the result views in light and dark, English and Chinese, through Debian's Chromium.
 * Start the harness first (`npx vite --config test/renderer/harness/vite.config.ts`), then
 * `node_modules/.bin/node test/renderer/harness/shoot.ts OUT_DIR [name=query ...]`.
 */
import { mkdirSync } from 'node:fs';
import { chromium } from 'playwright-core';

const out = process.argv[2] ?? '/tmp/mp/shots';
mkdirSync(out, { recursive: true });
const pages = process.argv.slice(3).map((a) => [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)] as [string, string]);
const defaults: [string, string][] = [];
for (const theme of ['light', 'dark']) {
  for (const locale of ['en', 'zh-CN']) {
    defaults.push([`simulate-gpt2-${locale}-${theme}`, `view=simulate&key=gpt2&locale=${locale}&theme=${theme}`]);
    defaults.push([`maxbatch-gpt2-${locale}-${theme}`, `view=maxbatch&key=gpt2&locale=${locale}&theme=${theme}`]);
  }
}
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium' });
for (const [name, query] of pages.length ? pages : defaults) {
  const theme = /theme=dark/.test(query) ? 'dark' : 'light';
  const page = await browser.newPage({ viewport: { width: 1240, height: 900 }, deviceScaleFactor: 1, colorScheme: theme });
  page.on('console', (m) => m.type() === 'error' && console.log(name, m.text()));
  page.on('pageerror', (e) => console.log(name, e.message));
  await page.goto(`http://127.0.0.1:5199/?${query}`);
  await page.waitForSelector('body[data-ready="1"]', { timeout: 20_000, state: 'attached' });
  await page.waitForTimeout(400);
  await page.screenshot({ path: `${out}/${name}.png`, fullPage: true });
  await page.close();
  console.log(`${out}/${name}.png`);
}
await browser.close();
