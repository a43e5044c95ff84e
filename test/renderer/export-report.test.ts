/**
 * The Markdown reports of real simulations: every table keeps its shape (rows split as GFM splits them), user text
 * with table pipes, HTML and Markdown stays text, the numbers are the results', a comparison's differences are
 * against its first plan.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseGpuCatalog } from '../../engine/gpu/catalog.ts';
import { planGpu } from '../../engine/gpu/device.ts';
import { safeParsePlan } from '../../engine/plan/parse.ts';
import { simulate } from '../../engine/train/simulate.ts';
import type { SimulateResult } from '../../engine/result/index.ts';
import { comparisonReport } from '../../renderer/src/export/comparison-report.ts';
import { planReport } from '../../renderer/src/export/report.ts';
import { formatBytes, formatPercent } from '../../renderer/src/charts/units.ts';
import { differingSettings, planSettings as planSettingsOf, SETTING_KEYS, type SettingKey } from '../../engine/compare/settings.ts';
import type { Plan } from '../../engine/plan/schema.ts';
import { settingLabel, settingValueText } from '../../renderer/src/compare/words.ts';
import { catalogues } from '../../renderer/src/i18n/index.ts';
import { escapeText } from '../../renderer/src/export/markdown.ts';
import { caveatWords } from '../../renderer/src/results/words.ts';

const root = new URL('../../', import.meta.url);
const catalog = parseGpuCatalog(JSON.parse(readFileSync(new URL('resources/gpus.json', root), 'utf8')));
const baseJson = JSON.parse(readFileSync(new URL('examples/gpt2-config-json.plan.json', root), 'utf8')) as Record<string, unknown>;

function run(batch: number, extra: Record<string, unknown> = {}): { plan: Record<string, unknown>; result: SimulateResult } {
  const json = { ...baseJson, training: { ...(baseJson.training as object), batch_size: batch, ...extra } };
  const parsed = safeParsePlan(json, { catalog });
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
  return { plan: JSON.parse(JSON.stringify(parsed.plan)) as Record<string, unknown>, result: simulate(parsed.plan, { device: planGpu(parsed.plan, catalog) }) };
}

/** A plan file as the reports get it, parsed again (the engine's Plan). */
function planOf(json: Record<string, unknown>): Plan {
  const parsed = safeParsePlan(json, { catalog });
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
  return parsed.plan;
}

const a = run(4);
const b = run(8);
const c = run(8, { activation_checkpointing: true });

const HOSTILE_NAME = '| x <script>alert(1)</script> [a](javascript:alert(1))';
const AT = new Date('2026-11-24T03:40:00Z');

/** GFM's row split: cells between unescaped pipes, the outer pipes dropped. */
function splitRow(line: string): string[] {
  const cells: string[] = [];
  let current = '';
  for (let i = 0; i < line.length; i++) {
    if (line[i] === '\\' && i + 1 < line.length) (current += line[i]! + line[i + 1]), i++;
    else if (line[i] === '|') cells.push(current), (current = '');
    else current += line[i];
  }
  cells.push(current);
  return cells.slice(1, -1).map((s) => s.trim());
}

/** Every table of a document: its header, and its rows as cells. */
function tables(md: string): { header: string[]; rows: string[][] }[] {
  const out: { header: string[]; rows: string[][] }[] = [];
  const lines = md.split('\n');
  for (let i = 0; i + 1 < lines.length; i++) {
    if (!lines[i]!.startsWith('|') || !/^\|( *:?-+:? *\|)+$/.test(lines[i + 1]!)) continue;
    const header = splitRow(lines[i]!);
    const rows: string[][] = [];
    let j = i + 2;
    for (; j < lines.length && lines[j]!.startsWith('|'); j++) rows.push(splitRow(lines[j]!));
    out.push({ header, rows });
    i = j;
  }
  return out;
}

/** The document without its fenced code blocks (memory_summary's text). */
function prose(md: string): string {
  return md.replace(/^```[^\n]*\n[\s\S]*?\n```$/gm, '');
}

function expectWellFormed(md: string): void {
  const found = tables(prose(md));
  expect(found.length).toBeGreaterThan(0);
  for (const t of found) for (const r of t.rows) expect(r).toHaveLength(t.header.length);
  // no raw HTML: user text's < and > are entities
  expect(md).not.toMatch(/<[a-z/!]/i);
  // no link made from user text
  expect(md).not.toMatch(/(?<!\\)\]\(javascript/);
}

describe('a plan’s report', () => {
  const md = planReport({
    name: HOSTILE_NAME,
    notes: 'baseline\n# not a heading\n<img src=x onerror=alert(1)>',
    tags: ['a|b', '*x*'],
    plan: { ...a.plan, name: HOSTILE_NAME },
    simulation: a.result,
    advice: [],
    images: { timeline: { file: 'my plan-timeline-0badf00d.png', alt: 'Memory over the training steps' } },
    locale: 'en',
    generatedAt: AT,
  });

  it('keeps every table’s shape and lets no user text through as HTML, a link or a heading', () => {
    expectWellFormed(md);
    expect(md.split('\n')[0]).toBe('# \\| x &lt;script&gt;alert(1)&lt;/script&gt; \\[a\\](javascript:alert(1))');
    expect(prose(md).split('\n').filter((l) => /^#{1,6} /.test(l))).toEqual(['# ' + md.split('\n')[0]!.slice(2), ...prose(md).split('\n').filter((l) => /^#{2,6} /.test(l))]);
    expect(prose(md).split('\n').filter((l) => /^#{2,6} /.test(l)).every((h) => !h.includes('not a heading'))).toBe(true);
    expect(md).toContain('**Tags**: a\\|b, \\*x\\*');
  });

  it('has the settings table with the plan’s values, defaults filled in', () => {
    const settings = tables(prose(md)).find((t) => t.header[0] === 'Setting')!;
    // The compare view's rows and words (engine/compare/settings.ts, compare/words.ts): one row per setting.
    expect(settings.rows.map((r) => r[0])).toEqual(SETTING_KEYS.map((k) => escapeText(settingLabel(catalogues.en, k))));
    const value = (key: SettingKey) => settings.rows[SETTING_KEYS.indexOf(key)]?.[1];
    expect(value('training.batch_size')).toBe('4');
    expect(value('training.precision')).toBe('amp\\_bf16');
    expect(value('training.optimizer')).toBe('AdamW');
    // left out of the plan file, written out: the defaults
    expect(value('training.optimizer_impl')).toBe('foreach (default)');
    expect(value('model')).toBe(escapeText(settingValueText(catalogues.en, 'model', planSettingsOf(planOf(a.plan))[0]!.value, 'en')));
  });

  it('says so when the plan does not parse, instead of a settings table', () => {
    const broken = planReport({ name: 'x', plan: { format: 'memplan.plan', version: 1, model: { preset: 'nope' } }, simulation: null, locale: 'en', generatedAt: AT });
    expect(broken).toContain('cannot be listed here');
    expect(tables(prose(broken)).find((t) => t.header[0] === 'Setting')).toBeUndefined();
  });

  it('has the three peaks in bytes, exactly the result’s', () => {
    const memory = tables(prose(md)).find((t) => t.header.join() === 'Quantity,Size,Bytes')!;
    const bytes = (label: string) => Number(memory.rows.find((r) => r[0] === label)?.[2]);
    expect(bytes('Peak allocated')).toBe(a.result.peak_allocated_bytes);
    expect(bytes('Peak reserved')).toBe(a.result.peak_reserved_bytes);
    expect(bytes('nvidia-smi')).toBe(a.result.nvidia_smi_bytes);
  });

  it('has the breakdown at the peak, summing to the peak reserved', () => {
    const breakdown = tables(prose(md)).find((t) => t.header[0] === 'Memory holds')!;
    expect(breakdown.rows.reduce((sum, r) => sum + Number(r[2]), 0)).toBe(a.result.peak_reserved_bytes);
  });

  it('links the chart saved beside it, the file name percent-encoded', () => {
    expect(md).toContain('![Memory over the training steps](my%20plan-timeline-0badf00d.png)');
  });

  it('is written in Chinese for a Chinese interface', () => {
    const zh = planReport({ name: 'x', plan: a.plan, simulation: a.result, locale: 'zh-CN', generatedAt: AT });
    expect(zh).toContain('## 设置');
    expect(zh).toContain('峰值预留');
    expectWellFormed(zh);
  });

  it('says what the answer assumes and how sure memplan is, as the result view does', () => {
    const caveats = a.result.caveats!;
    const section = md.slice(md.indexOf('## What this answer assumes'));
    expect(section.split('\n')[2]).toBe(`**${catalogues.en.rConfidence(caveats.confidence)}**`);
    for (const c of caveats.items) {
      const text = caveatWords(catalogues.en, c, 'en', (id) => (id === a.result.gpu.id ? a.result.gpu.name : id)).text;
      expect(section).toContain(`- ${escapeText(text)}`);
    }
    expect(caveats.items.length).toBeGreaterThan(3);
    // a result stored before memplan reported caveats has no such section
    const old = planReport({ name: 'x', plan: a.plan, simulation: { ...a.result, caveats: null }, locale: 'en', generatedAt: AT });
    expect(old).not.toContain('What this answer assumes');
    expect(planReport({ name: 'x', plan: a.plan, simulation: a.result, locale: 'zh-CN', generatedAt: AT })).toContain('## 这个结果的前提');
  });

  it('says what trains under LoRA, with PEFT\'s trainable%, and nothing of it for a full fine-tune', () => {
    const lora = run(4, { lora: { r: 8, alpha: 16, target_modules: 'all-linear' } });
    const rows = tables(planReport({ name: 'x', plan: lora.plan, simulation: lora.result, locale: 'en', generatedAt: AT })).flatMap((t) => t.rows);
    // GPT-2's 12 blocks, r 8 on c_attn, attn.c_proj, c_fc and mlp.c_proj: 8 x (768+2304 + 768+768 + 768+3072 + 3072+768) each
    expect(rows).toContainEqual(['Trainable', '1,179,648 trainable (0.9391%)']);
    const full = tables(planReport({ name: 'x', plan: a.plan, simulation: a.result, locale: 'en', generatedAt: AT })).flatMap((t) => t.rows);
    expect(full.some((r) => r[0] === 'Trainable')).toBe(false);
    const zh = planReport({ name: 'x', plan: lora.plan, simulation: lora.result, locale: 'zh-CN', generatedAt: AT });
    expect(zh).toContain('| 可训练参数 | 可训练 1,179,648 个（0.9391%） |');
  });

  it('says when there is no result', () => {
    expect(planReport({ name: 'x', plan: a.plan, simulation: null, locale: 'en', generatedAt: AT })).toContain('No result: the plan has not been simulated');
  });
});

describe('a comparison’s report', () => {
  const md = comparisonReport({
    name: 'Batch 4 vs 8 | checkpointing',
    plans: [
      { name: 'bs 4', plan: a.plan, simulation: a.result },
      { name: 'bs 8 <b>', plan: b.plan, simulation: b.result, status: 'edited' },
      { name: 'bs 8 + ckpt', plan: c.plan, simulation: c.result, whatChanged: 'checkpointing saves *most*' },
    ],
    images: [{ file: 'cmp-timelines.png', alt: 'Timelines' }],
    locale: 'en',
    generatedAt: AT,
  });

  it('keeps every table’s shape with one column per plan', () => {
    expectWellFormed(md);
    for (const t of tables(prose(md))) expect(t.header).toHaveLength(4);
  });

  it('lists only the settings that differ, and counts the others', () => {
    const settings = tables(prose(md)).find((t) => t.header[0] === 'Setting')!;
    expect(settings.rows.map((r) => r[0])).toEqual(['Batch size', 'Activation checkpointing']);
    expect(settings.rows[0]!.slice(1)).toEqual(['4', '8', '8']);
    // the plans differ in exactly the settings the compare view and the attribution find
    expect(differingSettings(planOf(a.plan), planOf(c.plan))).toEqual(['training.batch_size', 'training.activation_checkpointing']);
    expect(md).toMatch(/\d+ other settings are the same in every plan\./);
  });

  it('gives each plan’s peak with its difference to the first, in bytes and %', () => {
    const numbers = tables(prose(md)).find((t) => t.header[0] === 'Quantity')!;
    const row = numbers.rows.find((r) => r[0] === 'Peak reserved')!;
    const base = a.result.peak_reserved_bytes;
    expect(row[1]).toBe(formatBytes(base, 'en'));
    const diff = b.result.peak_reserved_bytes - base;
    expect(row[2]).toBe(`${formatBytes(b.result.peak_reserved_bytes, 'en')} (${formatBytes(diff, 'en', { signed: true })}, ${formatPercent(diff / base, 'en', { signed: true })})`);
    expect(diff).toBeGreaterThan(0);
    expect(c.result.peak_reserved_bytes).toBeLessThan(b.result.peak_reserved_bytes);
  });

  it('gives each plan’s confidence', () => {
    const numbers = tables(prose(md)).find((t) => t.header[0] === 'Quantity')!;
    const row = numbers.rows.find((r) => r[0] === 'Confidence')!;
    expect(row.slice(1)).toEqual([a, b, c].map((x) => catalogues.en.rConfidence(x.result.caveats!.confidence)));
  });

  it('says which plan was edited since, and what changed, escaped', () => {
    expect(md).toContain('2. bs 8 &lt;b&gt; (edited since the comparison was saved: shown as it is now)');
    expect(md).toContain('- **3. bs 8 + ckpt**: checkpointing saves \\*most\\*');
    expect(md).toContain('![Timelines](cmp-timelines.png)');
  });
});
