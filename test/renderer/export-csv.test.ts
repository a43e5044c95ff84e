/** A real simulation's timeline as CSV, parsed back: every point a row, the columns the header names, no peak lost. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseGpuCatalog } from '../../engine/gpu/catalog.ts';
import { planGpu } from '../../engine/gpu/device.ts';
import { parsePlanText } from '../../engine/plan/parse.ts';
import { simulate } from '../../engine/train/simulate.ts';
import { csvField, timelineCsv, TIMELINE_CSV_COLUMNS } from '../../renderer/src/export/csv.ts';

const root = new URL('../../', import.meta.url);
const plan = parsePlanText(readFileSync(new URL('examples/gpt2-config-json.plan.json', root), 'utf8'));
const catalog = parseGpuCatalog(JSON.parse(readFileSync(new URL('resources/gpus.json', root), 'utf8')));
const result = simulate(plan, { device: planGpu(plan, catalog) });
const t = result.timeline;

/** RFC 4180, as a spreadsheet reads it: quoted fields may hold commas, quotes ("") and line breaks. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') (field += '"'), i++;
      else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') row.push(field), (field = '');
    else if (c === '\n') row.push(field), rows.push(row), (row = []), (field = '');
    else field += c;
  }
  if (field || row.length) row.push(field), rows.push(row);
  return rows;
}

describe('the timeline as CSV', () => {
  const csv = timelineCsv(t, { title: 'GPT-2, "small" | <b>\nsecond line', kind: 'simulate' });
  const lines = csv.split('\n');
  const comments = lines.filter((l) => l.startsWith('#'));
  const rows = parseCsv(lines.filter((l) => !l.startsWith('#')).join('\n'));
  const [header, ...data] = rows;
  const col = (name: string) => header!.indexOf(name);

  it('documents every column in a comment line before the header, and says the rows are decimated', () => {
    for (const [name] of TIMELINE_CSV_COLUMNS) expect(comments.some((c) => c.startsWith(`# ${name}: `))).toBe(true);
    expect(comments.join('\n')).toContain(`${t.event.length} rows, decimated`);
    expect(comments.join('\n')).toContain(`(${t.events} events in all)`);
    // the title's line break does not end the comment
    expect(comments[0]).toBe('# memplan timeline (simulate): GPT-2, "small" | <b> second line');
  });

  it('has one row per point of the result, each as wide as the header', () => {
    expect(header).toEqual(TIMELINE_CSV_COLUMNS.map(([name]) => name));
    expect(data).toHaveLength(t.event.length);
    expect(t.event.length).toBeGreaterThan(100);
    for (const r of data) expect(r).toHaveLength(header!.length);
  });

  it('holds the result’s columns exactly, both allocated and reserved', () => {
    data.forEach((r, i) => {
      expect(Number(r[col('event_first')])).toBe(t.event[i]);
      expect(Number(r[col('allocated_min_bytes')])).toBe(t.allocated_min[i]);
      expect(Number(r[col('allocated_max_bytes')])).toBe(t.allocated_max[i]);
      expect(Number(r[col('reserved_min_bytes')])).toBe(t.reserved_min[i]);
      expect(Number(r[col('reserved_max_bytes')])).toBe(t.reserved_max[i]);
      expect(Number(r[col('step')])).toBe(t.step[i]);
      expect(r[col('phase')]).toBe(t.phases[t.phase[i]!]);
    });
    const max = (name: string) => Math.max(...data.map((r) => Number(r[col(name)])));
    expect(max('allocated_max_bytes')).toBe(result.peak_allocated_bytes);
    expect(max('reserved_max_bytes')).toBe(result.peak_reserved_bytes);
  });

  it('covers every event once: each bucket ends where the next begins', () => {
    for (let i = 0; i + 1 < data.length; i++) expect(Number(data[i]![col('event_last')]) + 1).toBe(Number(data[i + 1]![col('event_first')]));
    expect(Number(data.at(-1)![col('event_last')]) - Number(data[0]![col('event_first')]) + 1).toBe(t.events);
  });

  it('adds the real run’s reserved columns for a replay', () => {
    const replayed = { ...t, real_reserved_min: t.reserved_min, real_reserved_max: t.reserved_max };
    const [h, first] = parseCsv(timelineCsv(replayed).split('\n').filter((l) => !l.startsWith('#')).join('\n'));
    expect(h!.slice(-2)).toEqual(['real_reserved_min_bytes', 'real_reserved_max_bytes']);
    expect(Number(first!.at(-1))).toBe(t.reserved_max[0]);
  });

  it('quotes fields as RFC 4180 says', () => {
    expect(csvField('a,b')).toBe('"a,b"');
    expect(csvField('say "hi"')).toBe('"say ""hi"""');
    expect(csvField('two\nlines')).toBe('"two\nlines"');
    expect(csvField(12)).toBe('12');
    expect(parseCsv(['a,b', 'say "hi"', 'two\nlines'].map(csvField).join(',') + '\n')).toEqual([['a,b', 'say "hi"', 'two\nlines']]);
  });
});
