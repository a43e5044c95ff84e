/// <reference lib="dom" />
/**
 * A real run next to a plan: a recorded snapshot opened (its peaks, segments at the peak and what-ifs checked
 * against the engine's own replay of the same file, computed here), a calibration run opened and compared with
 * its saved plan (prediction, measurement and their difference checked against the engine's simulate and replay),
 * attached to the plan and reopened from the database after a reload in Chinese; a large synthetic snapshot
 * cancelled while it is read; a corrupt file's message with its byte offset.
 */
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import catalog from '../../resources/gpus.json' with { type: 'json' };
import { parseGpuCatalog, planGpu, readSnapshotBytes, replay, simulate, safeParsePlan, type ReplayResult } from '../../engine/index.ts';
import { SNAPSHOT_WHAT_IFS } from '../../renderer/src/snapshot/what-ifs.ts';
import { syntheticSnapshot } from '../engine/snapshot/synthetic-snapshot.ts';
import { launchApp, screenshot, type App } from './harness.ts';
import type { ServedWithBridge } from './serve.ts';

const fixture = (path: string) => new Uint8Array(readFileSync(new URL(`../fixtures/${path}`, import.meta.url)));
const CALIBRATION = 'mlp_fp32_adam_foreach';

let app: App;
let bridge: ServedWithBridge['bridge'];
beforeAll(async () => {
  app = await launchApp();
  bridge = (app.served as ServedWithBridge).bridge;
});
afterAll(async () => {
  await app?.close();
});

const view = (app: App) => app.page.locator('[data-testid="snapshot-view"]');
const num = async (app: App, selector: string, attribute: string) => Number(await app.page.locator(selector).first().getAttribute(attribute));

async function openSnapshot(app: App, name: string, bytes: Uint8Array): Promise<void> {
  bridge.queueOpenFile({ name, bytes });
  if (await view(app).count()) await app.page.locator('[data-testid="snapshot-view"] .actions button').first().click();
  else await app.page.locator('[data-testid="open-snapshot"]').click();
}

describe('a real run next to a plan', () => {
  test('a recorded snapshot: peaks, segments at the peak and what-ifs as the engine replays it', async () => {
    const { page } = app;
    const bytes = fixture('traces/cnn_amp_fp16.pickle.gz');
    const expected: ReplayResult = replay(readSnapshotBytes(bytes), { whatIf: SNAPSHOT_WHAT_IFS });
    await openSnapshot(app, 'cnn_amp_fp16.pickle.gz', bytes);
    await page.locator('[data-testid="snapshot-view"][data-status="done"]').waitFor({ timeout: 60_000 });
    expect(await page.locator('[data-testid="snapshot-name"]').textContent()).toBe('cnn_amp_fp16.pickle.gz');
    expect(await num(app, '[data-testid="snapshot-peaks"]', 'data-peak-allocated')).toBe(expected.real_peak_allocated_bytes);
    expect(await num(app, '[data-testid="snapshot-peaks"]', 'data-peak-reserved')).toBe(expected.real_peak_reserved_bytes);
    expect(await num(app, '[data-testid="snapshot-peaks"]', 'data-events')).toBe(expected.events);
    expect(await num(app, '[data-testid="snapshot-fidelity"]', 'data-mismatches')).toBe(0);
    const peak = expected.peak_segments!;
    expect(await num(app, '[data-testid="snapshot-segments"]', 'data-count')).toBe(peak.segments.length);
    expect(await num(app, '[data-testid="snapshot-segments"]', 'data-allocated')).toBe(peak.allocated_bytes);
    expect(await page.locator('[data-testid="snapshot-segments"] .row').count()).toBe(Math.min(24, peak.segments.length));
    const rows = page.locator('[data-testid="snapshot-what-if"] tbody tr[data-conf]');
    expect(await rows.count()).toBe(SNAPSHOT_WHAT_IFS.length);
    for (const [i, w] of expected.what_if.entries()) {
      expect(await rows.nth(i).getAttribute('data-conf')).toBe(w.alloc_conf);
      expect(Number(await rows.nth(i).getAttribute('data-peak-reserved'))).toBe(w.peak_reserved_bytes);
    }
    // the timeline chart drew (a canvas with pixels)
    expect(await page.locator('[data-testid="snapshot-view"] canvas').count()).toBeGreaterThanOrEqual(1);
    expect(app.errors).toEqual([]);
  });

  test('a calibration run beside its saved plan: prediction, measurement and their difference; attached', async () => {
    const { page } = app;
    const measurement = JSON.parse(readFileSync(new URL(`../fixtures/calibration/${CALIBRATION}.json`, import.meta.url), 'utf8')) as { plan: Record<string, unknown> };
    const saved = bridge.storage.plans.save({ name: 'MLP fp32 Adam (calibration)', plan: measurement.plan, notes: '', tags: [], result: null });
    const gpus = parseGpuCatalog(catalog);
    const parsed = safeParsePlan(measurement.plan, { catalog: gpus });
    if (!parsed.ok) throw new Error('the calibration plan does not parse');
    const predicted = simulate(parsed.plan, { device: planGpu(parsed.plan, gpus, null) });
    const bytes = fixture(`calibration/${CALIBRATION}.pickle.gz`);
    const measured = replay(readSnapshotBytes(bytes), { whatIf: [] });

    await openSnapshot(app, `${CALIBRATION}.pickle.gz`, bytes);
    await page.locator('[data-testid="snapshot-view"][data-status="done"]').waitFor({ timeout: 60_000 });
    await page.locator('#snapshot-plan').selectOption(saved.id);
    const allocated = page.locator('[data-testid="snapshot-diff"] tr[data-row="allocated"]');
    await allocated.waitFor({ timeout: 60_000 });
    expect(Number(await allocated.getAttribute('data-predicted'))).toBe(predicted.peak_allocated_bytes);
    expect(Number(await allocated.getAttribute('data-measured'))).toBe(measured.real_peak_allocated_bytes);
    expect(Number(await allocated.getAttribute('data-diff'))).toBe(predicted.peak_allocated_bytes - measured.real_peak_allocated_bytes);
    const reserved = page.locator('[data-testid="snapshot-diff"] tr[data-row="reserved"]');
    expect(Number(await reserved.getAttribute('data-predicted'))).toBe(predicted.peak_reserved_bytes);
    expect(Number(await reserved.getAttribute('data-measured'))).toBe(measured.real_peak_reserved_bytes);
    // the difference as the user reads it: bytes and percent
    const diffText = (await reserved.locator('td').nth(3).textContent())!;
    const pct = ((predicted.peak_reserved_bytes - measured.real_peak_reserved_bytes) / measured.real_peak_reserved_bytes) * 100;
    expect(diffText).toContain(`${pct >= 0.05 ? '+' : pct <= -0.05 ? '-' : ''}${Math.abs(pct).toFixed(1)}%`);
    // prediction and measurement on one chart: two series in its legend
    expect(await page.locator('[data-testid="snapshot-compare"] .legend li').filter({ hasText: 'Prediction' }).count()).toBe(1);
    expect(await page.locator('[data-testid="snapshot-compare"] .legend li').filter({ hasText: 'Measurement' }).count()).toBe(1);

    await page.locator('[data-testid="snapshot-compare"] button', { hasText: 'Attach to this plan' }).click();
    await page.locator('[data-testid="snapshot-attached"] li').first().waitFor();
    const stored = bridge.storage.snapshots.list(saved.id).snapshots;
    expect(stored).toHaveLength(1);
    expect(stored[0]).toMatchObject({ name: `${CALIBRATION}.pickle.gz`, size_bytes: bytes.length, real_peak_allocated_bytes: measured.real_peak_allocated_bytes });
    await screenshot(page, 'snapshot-compare-en');
    await page.locator('[data-testid="snapshot-view"] .body').evaluate((el) => el.scrollTo(0, 0));
    await screenshot(page, 'snapshot-en');
    expect(app.errors).toEqual([]);
  });

  test('in Chinese after a reload: the attached snapshot reopens from the database beside its plan', async () => {
    const { page } = app;
    await page.evaluate(() => localStorage.setItem('memplan.locale', 'zh-CN'));
    await page.reload();
    await page.locator('#plan-title').waitFor();
    await page.locator('[data-testid="open-snapshot"]').click(); // no file queued: the dialog is cancelled
    await view(app).waitFor();
    const plan = bridge.storage.plans.list().plans.find((p) => p.name.startsWith('MLP fp32'))!;
    await page.locator('#snapshot-plan').selectOption(plan.id);
    await page.locator('[data-testid="snapshot-attached"] li button').first().click();
    await page.locator('[data-testid="snapshot-view"][data-status="done"]').waitFor({ timeout: 60_000 });
    await page.locator('[data-testid="snapshot-diff"] tr[data-row="allocated"]').waitFor({ timeout: 60_000 });
    expect(await page.locator('[data-testid="snapshot-view"] h2').textContent()).toBe('真实运行');
    expect(await page.locator('[data-testid="snapshot-diff"] th').first().textContent()).toBe('指标');
    await screenshot(page, 'snapshot-zh-CN');
    await page.locator('[data-testid="snapshot-compare"]').scrollIntoViewIfNeeded();
    await page.locator('[data-testid="snapshot-view"] .body').evaluate((el) => el.scrollBy(0, 400));
    await screenshot(page, 'snapshot-compare-zh-CN');
    await page.evaluate(() => localStorage.setItem('memplan.locale', 'en'));
    await page.reload();
    await page.locator('#plan-title').waitFor();
    expect(app.errors).toEqual([]);
  });

  test('a large snapshot shows its progress while read and can be cancelled', async () => {
    const { page } = app;
    const { bytes, events } = syntheticSnapshot({ rounds: 8000 });
    expect(events).toBeGreaterThan(1_500_000);
    const gz = new Uint8Array(gzipSync(bytes, { level: 1 }));
    await openSnapshot(app, 'long-run.pickle.gz', gz);
    const progress = page.locator('[data-testid="snapshot-progress"] [role="progressbar"]');
    await progress.waitFor({ timeout: 30_000 });
    // progress moves before the user cancels
    await expect.poll(async () => Number(await progress.getAttribute('aria-valuenow')), { timeout: 30_000 }).toBeGreaterThan(0);
    const stage = await progress.getAttribute('data-stage');
    expect(['decompress', 'parse', 'trace', 'replay', 'segments', 'what_if']).toContain(stage);
    await page.locator('[data-testid="snapshot-progress"] button').click();
    await page.locator('[data-testid="snapshot-view"][data-status="cancelled"]').waitFor();
    await page.locator('[data-testid="snapshot-cancelled"]').waitFor();
    // the window stays responsive and no late result replaces the cancelled state
    await page.waitForTimeout(1500);
    expect(await view(app).getAttribute('data-status')).toBe('cancelled');
    expect(await page.locator('[data-testid="snapshot-peaks"]').count()).toBe(0);
    expect(app.errors).toEqual([]);
  });

  test('a corrupt file: a clear message with the byte offset where the pickle is malformed', async () => {
    const { page } = app;
    const { bytes } = syntheticSnapshot({ rounds: 5 });
    const bad = bytes.slice();
    let offset = 3000;
    while (!(bad[offset] === 0x7d && bad[offset + 1] === 0x28)) offset++;
    bad[offset] = 0xff;
    await openSnapshot(app, 'damaged.pickle', bad);
    await page.locator('[data-testid="snapshot-error"]').waitFor({ timeout: 30_000 });
    const text = (await page.locator('[data-testid="snapshot-error"]').textContent())!;
    expect(text).toContain('could not be read as a PyTorch memory snapshot');
    expect(text).toContain(`byte ${offset}`);
    expect(text).toContain('unknown pickle opcode byte 0xff');
    await screenshot(page, 'snapshot-error-en');
    expect(app.errors).toEqual([]);
  });

  test('a run capped with set_per_process_memory_fraction: the likely cap said, replayed under it, a cap typed', async () => {
    const { page } = app;
    // GPT-2 capped at 4,601,151,488 B (the measurement's allowed_bytes): it ran out of memory with room on the device.
    const bytes = fixture('traces/oom_under_cap.pickle.gz');
    const snapshot = readSnapshotBytes(bytes);
    const uncapped: ReplayResult = replay(snapshot, { whatIf: SNAPSHOT_WHAT_IFS });
    const cap = uncapped.likely_cap!;
    expect(cap.at_least_bytes).toBeLessThanOrEqual(4_601_151_488);
    expect(cap.below_bytes).toBeGreaterThan(4_601_151_488);
    await openSnapshot(app, 'oom_under_cap.pickle.gz', bytes);
    await page.locator('[data-testid="snapshot-view"][data-status="done"]').waitFor({ timeout: 60_000 });
    expect(await num(app, '[data-testid="snapshot-fidelity"]', 'data-mismatches')).toBe(uncapped.segment_event_mismatches);
    expect(uncapped.segment_event_mismatches).toBeGreaterThan(0);
    const likely = page.locator('[data-testid="snapshot-likely-cap"]');
    expect(Number(await likely.getAttribute('data-at-least'))).toBe(cap.at_least_bytes);
    expect(await likely.textContent()).toContain('release-and-retry');
    expect(await page.locator('#snapshot-cap').inputValue()).toBe('');
    await screenshot(page, 'snapshot-likely-cap-en');

    // One click: replayed under the cap's lower bound, every segment event as recorded; the field holds it.
    await likely.locator('button').click();
    await page.locator('[data-testid="snapshot-view"][data-status="done"]').waitFor({ timeout: 60_000 });
    await expect.poll(() => num(app, '[data-testid="snapshot-fidelity"]', 'data-mismatches')).toBe(0);
    const capped: ReplayResult = replay(snapshot, { whatIf: SNAPSHOT_WHAT_IFS, memoryLimitBytes: cap.at_least_bytes });
    expect(capped.segment_event_mismatches).toBe(0);
    expect(await page.locator('[data-testid="snapshot-likely-cap"]').count()).toBe(0);
    expect(await page.locator('#snapshot-cap').inputValue()).toBe(String(Number((cap.at_least_bytes / 2 ** 30).toFixed(3))));
    expect(await page.locator('[data-testid="snapshot-view"] .meta').textContent()).toMatch(/ · replayed under a cap of 4\.13\sGiB$/);
    const rows = page.locator('[data-testid="snapshot-what-if"] tbody tr[data-conf]');
    for (const [i, w] of capped.what_if.entries()) expect(Number(await rows.nth(i).getAttribute('data-peak-reserved'))).toBe(w.peak_reserved_bytes);

    // A cap typed in GiB (the measurement's own, rounded), and one too small: refused beside the field, nothing replayed.
    await page.locator('#snapshot-cap').fill('0.001');
    await page.locator('[data-testid="snapshot-cap"] button[type="submit"]').click();
    expect(await page.locator('[data-testid="snapshot-cap"] [role="alert"]').textContent()).toContain('at least 0.002 GiB');
    expect(await page.locator('#snapshot-cap').inputValue()).toBe('0.001');
    await page.locator('#snapshot-cap').fill('4.285');
    await page.locator('[data-testid="snapshot-cap"] button[type="submit"]').click();
    await expect.poll(() => page.locator('[data-testid="snapshot-view"] .meta').textContent()).toMatch(/replayed under a cap of 4\.29\sGiB$/);
    await page.locator('[data-testid="snapshot-view"][data-status="done"]').waitFor({ timeout: 60_000 });
    expect(await num(app, '[data-testid="snapshot-fidelity"]', 'data-mismatches')).toBe(replay(snapshot, { memoryLimitBytes: Math.round(4.285 * 2 ** 30) }).segment_event_mismatches);
    // Emptied: no cap again, and the suggestion comes back.
    await page.locator('#snapshot-cap').fill('');
    await page.locator('[data-testid="snapshot-cap"] button[type="submit"]').click();
    await page.locator('[data-testid="snapshot-likely-cap"]').waitFor({ timeout: 60_000 });
    expect(app.errors).toEqual([]);
  });
});
