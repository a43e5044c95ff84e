/// <reference lib="dom" />
// Code inside page.evaluate runs in the page: the DOM types describe it.
/**
 * Exports, from File > Export (the bridge sends the menu's commands as the main process would) and from the result
 * views' own buttons, checked as files: the plan file parses with the engine's schema, simulates with the CLI and
 * opens back in the app with the same peaks; the timeline's CSV parses with one row per point of the engine's
 * result; every PNG decodes with an opaque background (dark theme: dark, so its light text reads); the Markdown
 * report has its tables, escapes a hostile plan name, and every image it links was saved beside it.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { unzlibSync } from 'fflate';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseGpuCatalog, planGpu, safeParsePlan, simulate } from '../../engine/index.ts';
import { readPngHeader } from '../../renderer/src/export/png-header.ts';
import { launchApp, resultNumbers, ROOT, waitForResult, type App } from './harness.ts';
import type { ServedWithBridge } from './serve.ts';

let app: App;
let bridge: ServedWithBridge['bridge'];
beforeAll(async () => {
  app = await launchApp({ colorScheme: 'dark' });
  bridge = (app.served as ServedWithBridge).bridge;
});
afterAll(async () => {
  await app?.close();
});

const catalog = parseGpuCatalog(JSON.parse(readFileSync(join(ROOT, 'resources/gpus.json'), 'utf8')));
const PLAN_TEXT = readFileSync(join(ROOT, 'examples/mlp-fp16.plan.json'), 'utf8');
const HOSTILE = '| x <script>alert(1)</script> *bs*';

/** The CSV's data rows (comment lines and the header left out), split on commas (the rows hold numbers and ids). */
function csvRows(text: string): { header: string[]; rows: string[][] } {
  const lines = text.trimEnd().split('\n').filter((l) => !l.startsWith('#'));
  return { header: lines[0]!.split(','), rows: lines.slice(1).map((l) => l.split(',')) };
}

/** The first pixel of a PNG, RGBA (the first pixel of the first row reads the same under every PNG filter). */
function firstPixel(bytes: Uint8Array): number[] {
  const idat: Uint8Array[] = [];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let at = 8; at < bytes.length; ) {
    const length = view.getUint32(at);
    const type = String.fromCharCode(...bytes.subarray(at + 4, at + 8));
    if (type === 'IDAT') idat.push(bytes.subarray(at + 8, at + 8 + length));
    at += 12 + length;
  }
  const joined = new Uint8Array(idat.reduce((n, c) => n + c.length, 0));
  idat.reduce((at, c) => (joined.set(c, at), at + c.length), 0);
  const pixels = unzlibSync(joined);
  return [...pixels.subarray(1, 5)];
}

function expectChartPng(bytes: Uint8Array): void {
  const header = readPngHeader(bytes);
  expect(header).not.toBeNull();
  expect(header!.width).toBeGreaterThan(300);
  expect(header!.height).toBeGreaterThan(150);
  const [r, g, b, a] = firstPixel(bytes);
  expect(a).toBe(255);
  // the dark theme's surface, not transparent black nor white
  expect(Math.max(r!, g!, b!)).toBeLessThan(90);
}

/** The Markdown images a report links: their (decoded) file names. */
function linkedImages(md: string): string[] {
  return [...md.matchAll(/!\[[^\]]*\]\(([^)]+)\)/g)].map((m) => decodeURIComponent(m[1]!));
}

describe('exports', () => {
  test('from the menu: the plan file, the timeline as CSV, the chart as PNG, the report', async () => {
    const { page } = app;
    bridge.queueOpenFile({ name: 'mlp-fp16.plan.json', text: PLAN_TEXT });
    bridge.sendMenuCommand('open-plan');
    // the opened plan's name is in the title before it is renamed (else the rename can land mid-load)
    const title = page.locator('#plan-title');
    await expect.poll(() => title.inputValue()).toBe((JSON.parse(PLAN_TEXT) as { name: string }).name);
    await title.fill(HOSTILE);
    await expect.poll(() => title.inputValue()).toBe(HOSTILE);
    await waitForResult(page);
    const shown = await resultNumbers(page);

    // The plan file: the engine's schema reads it, the CLI simulates it to the same peaks, the app opens it back.
    bridge.sendMenuCommand('export-plan');
    await expect.poll(() => bridge.savedFiles.length).toBe(1);
    const planFile = bridge.savedFiles[0]!;
    expect(planFile.name).toMatch(/\.plan\.json$/);
    expect(planFile.name).not.toMatch(/[|<>*]/);
    const parsed = safeParsePlan(JSON.parse(planFile.text), { catalog });
    expect(parsed.ok).toBe(true);
    if (!parsed.ok) return;
    expect(parsed.plan.name).toBe(HOSTILE);
    const folder = mkdtempSync(join(tmpdir(), 'memplan-exports-'));
    writeFileSync(join(folder, 'plan.json'), planFile.text);
    const cli = spawnSync(process.execPath, [join(ROOT, 'cli/memplan.ts'), 'simulate', join(folder, 'plan.json'), '--json'], { encoding: 'utf8' });
    expect(cli.stderr).toBe('');
    const cliResult = JSON.parse(cli.stdout) as { peak_allocated_bytes: number; peak_reserved_bytes: number };
    expect(cliResult.peak_reserved_bytes).toBe(shown.peakReserved);
    expect(cliResult.peak_allocated_bytes).toBe(shown.peakAllocated);

    // The timeline: one row per point of the engine's result, its peaks the result's.
    const expected = simulate(parsed.plan, { device: planGpu(parsed.plan, catalog) });
    bridge.sendMenuCommand('export-timeline-csv');
    await expect.poll(() => bridge.savedFiles.length).toBe(2);
    const csv = bridge.savedFiles[1]!;
    expect(csv.name).toMatch(/\.timeline\.csv$/);
    const { header, rows } = csvRows(csv.text);
    expect(header).toContain('allocated_max_bytes');
    expect(header).toContain('reserved_max_bytes');
    expect(rows).toHaveLength(expected.timeline.event.length);
    for (const row of rows) expect(row).toHaveLength(header.length);
    const max = (column: string) => Math.max(...rows.map((r) => Number(r[header.indexOf(column)])));
    expect(max('allocated_max_bytes')).toBe(shown.peakAllocated);
    expect(max('reserved_max_bytes')).toBe(shown.peakReserved);

    // The chart on screen (the timeline) as PNG.
    bridge.sendMenuCommand('export-chart-png');
    await expect.poll(() => bridge.savedBinaries.length).toBe(1);
    expect(bridge.savedBinaries[0]!.name).toMatch(/\.timeline\.png$/);
    expectChartPng(bridge.savedBinaries[0]!.bytes);

    // The report: its tables, the name escaped, every linked image saved beside it.
    bridge.sendMenuCommand('export-report');
    await expect.poll(() => bridge.savedReports.length).toBe(1);
    const report = bridge.savedReports[0]!;
    expect(report.name).toMatch(/\.md$/);
    expect(report.text.split('\n')[0]).toBe('# \\| x &lt;script&gt;alert(1)&lt;/script&gt; \\*bs\\*');
    expect(report.text).not.toContain('<script>');
    expect(report.text).toContain('| Setting | Value |');
    expect(report.text).toContain(`| Peak reserved | `);
    expect(report.text).toContain(` | ${shown.peakReserved} |`);
    const linked = linkedImages(report.text);
    expect(linked.length).toBe(1);
    expect(report.images.map((i) => i.name).sort()).toEqual([...linked].sort());
    for (const image of report.images) expectChartPng(image.bytes);

    // The exported plan opens back in the app with the same result.
    bridge.queueOpenFile({ name: planFile.name, text: planFile.text });
    bridge.sendMenuCommand('open-plan');
    await expect.poll(() => page.locator('#plan-title').inputValue()).toBe(HOSTILE);
    await waitForResult(page);
    expect(await resultNumbers(page)).toEqual(shown);
    expect(app.errors).toEqual([]);
  });

  test('from the views: the timeline card’s CSV and PNG, the batch curve’s PNG, the Export menu’s report', async () => {
    const { page } = app;
    const files = bridge.savedFiles.length;
    await page.locator('[data-testid="timeline-card"] [data-export="timeline-csv"]').click();
    await expect.poll(() => bridge.savedFiles.length).toBe(files + 1);
    expect(csvRows(bridge.savedFiles.at(-1)!.text).rows.length).toBeGreaterThan(10);

    const binaries = bridge.savedBinaries.length;
    await page.locator('[data-testid="timeline-card"] [data-export="timeline-png"]').click();
    await expect.poll(() => bridge.savedBinaries.length).toBe(binaries + 1);
    expectChartPng(bridge.savedBinaries.at(-1)!.bytes);

    await page.locator('[data-testid="find-max-batch"]').click();
    await page.locator('section.results[data-search="done"]').waitFor({ timeout: 120_000 });
    await page.locator('[data-testid="max-batch-curve"] [data-export="batch-curve-png"]').click();
    await expect.poll(() => bridge.savedBinaries.length).toBe(binaries + 2);
    expect(bridge.savedBinaries.at(-1)!.name).toMatch(/\.batch-curve\.png$/);
    expectChartPng(bridge.savedBinaries.at(-1)!.bytes);

    // The Export menu of the results: the report now has the largest batch and its curve beside it.
    const reports = bridge.savedReports.length;
    await page.locator('[data-testid="export-menu"]').click();
    await page.locator('[data-export="report"]').click();
    await expect.poll(() => bridge.savedReports.length).toBe(reports + 1);
    const report = bridge.savedReports.at(-1)!;
    const maxBatch = Number(await page.locator('section.results').getAttribute('data-max-batch'));
    expect(report.text).toContain('## Largest batch that fits');
    expect(report.text).toContain(`| Largest micro-batch | ${maxBatch} |`);
    expect(linkedImages(report.text)).toEqual(report.images.map((i) => i.name));
    expect(report.images.some((i) => /batch-curve/.test(i.name))).toBe(true);
    for (const image of report.images) expectChartPng(image.bytes);

    await page.locator('[data-testid="export-menu"]').click();
    await page.locator('[data-export="plan-json"]').click();
    await expect.poll(() => bridge.savedFiles.length).toBe(files + 2);
    expect(safeParsePlan(JSON.parse(bridge.savedFiles.at(-1)!.text), { catalog }).ok).toBe(true);
    expect(app.errors).toEqual([]);
  });
});
