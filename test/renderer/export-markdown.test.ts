/**
 * The reports' Markdown helpers: user text stays text (no table broken, no HTML let through, no link made), tables
 * keep their shape whatever the cells hold. Rows are split as GitHub Flavored Markdown splits them: on every pipe
 * not preceded by a backslash, code spans included.
 */
import { describe, expect, it } from 'vitest';
import { bulletList, code, escapeText, fileStem, heading, image, raw, table } from '../../renderer/src/export/markdown.ts';

const HOSTILE = [
  '| x',
  'a | b | c',
  '<script>alert(1)</script>',
  '<img src=x onerror=alert(1)>',
  '[click](javascript:alert(1))',
  '![x](http://evil/x.png)',
  '*bold* _it_ `code` ~~gone~~',
  '# not a heading',
  '- not a list',
  '1. not a list',
  'two\nlines | and a pipe',
  'back\\slash\\|pipe',
  '&lt;already an entity&gt;',
  '$x^2$',
];

/** GFM's row split: cells between unescaped pipes, the outer pipes dropped. */
function splitRow(line: string): string[] {
  const cells: string[] = [];
  let current = '';
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c === '\\' && i + 1 < line.length) {
      current += c + line[i + 1];
      i++;
    } else if (c === '|') {
      cells.push(current);
      current = '';
    } else current += c;
  }
  cells.push(current);
  return cells.slice(1, -1).map((s) => s.trim());
}

/** What a cell shows once rendered: backslash escapes and the entities escapeText writes, undone. */
function shown(markdown: string): string {
  return markdown
    .replace(/\\([!-/:-@[-`{-~])/g, '$1')
    .replace(/&#32;/g, ' ')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
}

describe('escapeText', () => {
  it.each(HOSTILE)('shows %j literally, with no HTML tag, link or emphasis left', (text) => {
    const md = escapeText(text);
    expect(md).not.toMatch(/<[a-z/!]/i);
    expect(md).not.toMatch(/(?<!\\)[[*_`~|$]/);
    expect(md).not.toMatch(/^\s*[#+-]\s|^\s*\d+\.\s/m);
    expect(shown(md.replace(/ {2}\n/g, '\n'))).toBe(text);
  });

  it('leaves ordinary names readable', () => {
    expect(escapeText('GPT-2 · AMP bf16 · bs 8 (H100)')).toBe('GPT-2 · AMP bf16 · bs 8 (H100)');
    expect(escapeText('显存计划 v1.2')).toBe('显存计划 v1.2');
  });
});

describe('table', () => {
  it('keeps every row as wide as the header, whatever the cells hold', () => {
    const rows = HOSTILE.map((name, i) => [name, i, raw(`**${i}**`)]);
    const md = table(['Plan', 'Batch', 'Peak'], rows, ['left', 'right', 'right']);
    const lines = md.split('\n');
    expect(lines).toHaveLength(2 + HOSTILE.length);
    expect(splitRow(lines[0]!)).toEqual(['Plan', 'Batch', 'Peak']);
    expect(splitRow(lines[1]!)).toEqual(['---', '--:', '--:']);
    lines.slice(2).forEach((line, i) => {
      const cells = splitRow(line);
      expect(cells).toHaveLength(3);
      expect(shown(cells[0]!)).toBe(HOSTILE[i]!.replace(/\s*\n\s*/g, ' '));
      expect(cells[1]).toBe(String(i));
      expect(cells[2]).toBe(`**${i}**`);
    });
    expect(md).not.toMatch(/<[a-z/!]/i);
  });

  it('escapes pipes inside raw cells and code spans (GFM splits on them even there)', () => {
    const md = table(['a'], [[code('x | y')]]);
    expect(splitRow(md.split('\n')[2]!)).toEqual(['`x \\| y`']);
  });

  it('pads short rows and fills empty cells', () => {
    const md = table(['a', 'b', 'c'], [['only one'], ['', '', '']]);
    for (const line of md.split('\n').slice(2)) expect(splitRow(line)).toHaveLength(3);
  });
});

describe('the other builders', () => {
  it('heading: one line, escaped', () => {
    expect(heading(2, '<b>x</b>\n# y')).toBe('## &lt;b&gt;x&lt;/b&gt; \\# y');
  });
  it('bulletList: one item per line, each escaped', () => {
    expect(bulletList(['*a*', raw('**b**')])).toBe('- \\*a\\*\n- **b**');
  });
  it('code: a fence longer than any backtick run inside', () => {
    expect(code('a`b').markdown).toBe('``a`b``');
    expect(code('`x`').markdown).toBe('`` `x` ``');
  });
  it('image: the file name percent-encoded, the alt text escaped', () => {
    expect(image('Timeline [x]', 'my plan (v2) · 显存.png')).toBe('![Timeline \\[x\\]](my%20plan%20%28v2%29%20%C2%B7%20%E6%98%BE%E5%AD%98.png)');
  });
  it('fileStem: no characters file systems refuse, never empty', () => {
    expect(fileStem('a/b\\c:d*e?f"g<h>i|j')).toBe('a-b-c-d-e-f-g-h-i-j');
    expect(fileStem('  ..  ')).toBe('memplan');
    expect(fileStem('<script>')).toBe('script');
    expect(fileStem('x'.repeat(200))).toHaveLength(80);
  });
});
