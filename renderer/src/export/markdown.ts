/**
 * Markdown for memplan's reports (a plan's, a comparison's): escaping and the few block builders the reports use.
 * Pure (no DOM): the renderer, the tests and any other edge can call it.
 *
 * Note [User text in reports]
 * A plan's name, notes and tags are the user's text, and a report is read in tools that render Markdown and often
 * pass raw HTML through (GitHub, VS Code's preview, static site generators). So every piece of user text goes
 * through `escapeText` (or `cell` in a table): Markdown's punctuation is backslash-escaped, so `*x*` or `[a](b)`
 * stay literal, and `<`, `>` and `&` become entities, so `<script>` or `<img onerror=...>` is shown, never run.
 * In a table cell `|` is escaped too (GFM splits cells on unescaped pipes even inside code spans) and line breaks
 * become spaces (a row is one line). Only text the report writes itself is passed as `raw(...)`.
 */

/** Markdown the report itself wrote (trusted): written as is. Anything else given to the builders is escaped. */
export interface RawMarkdown {
  readonly markdown: string;
}

export type Inline = string | number | RawMarkdown;

export function raw(markdown: string): RawMarkdown {
  return { markdown };
}

// Inline syntax: emphasis, code, links and images (`[` is enough: without it `](` and `![` mean nothing), table
// pipes, strikethrough, math. A backslash before any ASCII punctuation is a literal in CommonMark, so escaping is
// always safe; the others (`-`, `.`, `(`) stay readable in the plain file.
const INLINE_SPECIAL = /[\\`*_[\]|~$]/g;
// Block syntax only matters at the start of a line: headings and list markers (followed by a space or the end),
// thematic breaks and setext underlines (a line of only `-` or `=`). `4.90 GiB` needs nothing.
const LINE_START_SPECIAL = /^(\s*)([#+-]|\d{1,9}[.)])(?=\s|$)|^(\s*)([=-])(?=[=-]*\s*$)/;

/** User text as inline Markdown: shown literally, never as Markdown or HTML. Line breaks kept (as hard breaks). */
export function escapeText(text: string): string {
  return text
    .replace(/\r\n?/g, '\n')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(INLINE_SPECIAL, (c) => `\\${c}`)
    .split('\n')
    .map((line) =>
      line.replace(LINE_START_SPECIAL, (_m, s1: string | undefined, m1: string | undefined, s2: string | undefined, m2: string | undefined) => {
        const space = s1 ?? s2 ?? '';
        const mark = m1 ?? m2 ?? '';
        return `${space.replace(/ /g, '&#32;')}${mark.slice(0, -1)}\\${mark.slice(-1)}`;
      }),
    )
    .join('  \n');
}

/** One table cell: escaped (unless raw), on one line. */
export function cell(value: Inline): string {
  const text = typeof value === 'number' ? String(value) : typeof value === 'string' ? escapeText(value) : value.markdown;
  return text.replace(/\s*\n\s*/g, ' ').replace(/(?<!\\)\|/g, '\\|') || ' ';
}

/** Inline Markdown of a value: user text escaped, numbers as they are, raw as written. */
export function inline(value: Inline): string {
  return typeof value === 'number' ? String(value) : typeof value === 'string' ? escapeText(value) : value.markdown;
}

/** `code` with a fence of backticks longer than any run inside (CommonMark code spans); not for table cells with pipes. */
export function code(text: string): RawMarkdown {
  const longest = Math.max(0, ...[...text.matchAll(/`+/g)].map((m) => m[0].length));
  const fence = '`'.repeat(longest + 1);
  const pad = text.startsWith('`') || text.endsWith('`') ? ' ' : '';
  return raw(`${fence}${pad}${text.replace(/\n/g, ' ')}${pad}${fence}`);
}

export function bold(value: Inline): RawMarkdown {
  return raw(`**${inline(value)}**`);
}

export type Align = 'left' | 'right' | 'center';

/** A GFM table: every cell escaped (unless raw) and kept on its row; rows shorter than the header are padded. */
export function table(header: readonly Inline[], rows: readonly (readonly Inline[])[], align: readonly Align[] = []): string {
  const width = header.length;
  const line = (cells: readonly Inline[]) => `| ${Array.from({ length: width }, (_, i) => cell(cells[i] ?? '')).join(' | ')} |`;
  const rule = `| ${Array.from({ length: width }, (_, i) => (align[i] === 'right' ? '--:' : align[i] === 'center' ? ':-:' : '---')).join(' | ')} |`;
  return [line(header), rule, ...rows.map(line)].join('\n');
}

/** `# text` at `level` (1-6), the text escaped and on one line. */
export function heading(level: 1 | 2 | 3 | 4 | 5 | 6, value: Inline): string {
  return `${'#'.repeat(level)} ${inline(value).replace(/\s*\n\s*/g, ' ')}`;
}

/** `- item` for each, escaped unless raw. */
export function bulletList(items: readonly Inline[]): string {
  return items.map((item) => `- ${inline(item).replace(/\n/g, '\n  ')}`).join('\n');
}

/**
 * An image beside the report: `![alt](file.png)`. The file name is percent-encoded (spaces, parentheses, non-ASCII)
 * so any name the report chose links; the alt text is escaped.
 */
export function image(alt: string, fileName: string): string {
  const target = encodeURIComponent(fileName).replace(/[()']/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `![${escapeText(alt).replace(/\n/g, ' ')}](${target})`;
}

/** Blocks joined by one blank line, empty ones left out; ends with a newline. */
export function document(blocks: readonly (string | null | undefined | false)[]): string {
  return blocks.filter((b): b is string => typeof b === 'string' && b.length > 0).join('\n\n') + '\n';
}

/**
 * A file name for an export: the plan's name without the characters file systems refuse (and the IPC contract's
 * `suggested_name` check), spaces kept, at most `maxChars`, never empty.
 */
export function fileStem(name: string, fallback = 'memplan', maxChars = 80): string {
  const stem = name
    .replace(/[/\\:*?"<>|\u0000-\u001f]+/g, '-')
    .replace(/^[\s.-]+|[\s.-]+$/g, '')
    .slice(0, maxChars)
    .trim();
  return stem || fallback;
}
