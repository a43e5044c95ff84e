/**
 * Starting the app for a scenario: the built renderer (out/renderer) served over http with `window.memplan`
 * answered by the main process's handlers and a real SQLite file (test/e2e/support/bridge.ts), in Debian's
 * Chromium. Also: screenshots under test/e2e/screenshots/, and a few helpers every scenario uses.
 */
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const SCREENSHOTS = fileURLToPath(new URL('./screenshots/', import.meta.url));
export const CHROMIUM = process.env.MEMPLAN_CHROMIUM ?? '/usr/bin/chromium';

export interface Served {
  url: string;
  /** Installs `window.memplan` in a browser context (before any page script runs). */
  install(context: BrowserContext): Promise<void>;
  close(): Promise<void>;
}

export interface App {
  browser: Browser;
  context: BrowserContext;
  page: Page;
  served: Served;
  /** Messages the page logged as errors (uncaught exceptions included). */
  errors: string[];
  close(): Promise<void>;
}

export interface LaunchOptions {
  locale?: string;
  colorScheme?: 'light' | 'dark';
  width?: number;
  height?: number;
  /** Reuse a server (and its database) across launches. */
  served?: Served;
}


export async function launchApp(options: LaunchOptions = {}): Promise<App> {
  const served = options.served ?? (await (await import('./serve.ts')).serveWithBridge());
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--disable-gpu', '--font-render-hinting=none'] });
  const context = await browser.newContext({
    viewport: { width: options.width ?? 1440, height: options.height ?? 900 },
    deviceScaleFactor: 1,
    locale: options.locale ?? 'en-US',
    colorScheme: options.colorScheme ?? 'light',
  });
  await served.install(context);
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  page.on('dialog', (d) => void d.accept());
  await page.goto(served.url);
  await page.locator('#plan-title').waitFor();
  return {
    browser,
    context,
    page,
    served,
    errors,
    async close() {
      await browser.close();
      if (!options.served) await served.close();
    },
  };
}

/** Waits until the result on screen is of the plan as it is now (not stale, not simulating). */
export async function waitForResult(page: Page, timeout = 60_000): Promise<void> {
  await page.locator('section.results[data-result-state="ready"]').waitFor({ timeout });
}

/** The result on screen, as the results section exposes it for tests. */
export async function resultNumbers(page: Page): Promise<{ peakAllocated: number; peakReserved: number; fits: boolean }> {
  const section = page.locator('section.results');
  return {
    peakAllocated: Number(await section.getAttribute('data-peak-allocated')),
    peakReserved: Number(await section.getAttribute('data-peak-reserved')),
    fits: (await section.getAttribute('data-fits')) === 'true',
  };
}

/** Saves the window as test/e2e/screenshots/<name>.png (toasts dismissed first, unless kept). */
export async function screenshot(page: Page, name: string, { keepToasts = false } = {}): Promise<string> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  if (!keepToasts) {
    // a toast may leave on its own between listing and clicking: a short timeout, not the default 30 s
    for (const close of await page.locator('.toast .close').all()) await close.click({ timeout: 500 }).catch(() => undefined);
    await page.locator('.toast').first().waitFor({ state: 'detached', timeout: 2000 }).catch(() => undefined);
  }
  await page.mouse.move(1, 1);
  const path = `${SCREENSHOTS}${name}.png`;
  await page.screenshot({ path, animations: 'disabled' });
  return path;
}
