/**
 * A timeline (engine/result/timeline.ts) as CSV: one row per point of the result, as the result holds it.
 *
 * Note [Timeline CSV resolution]
 * The rows are the result's decimated points (about 2,000, Note [Timeline columns]), not one row per allocator
 * event: each row is a bucket of consecutive events (`event_first`..`event_last`) with the minimum and the
 * maximum of allocated and reserved over it, so every peak and every dip is in the file. The full event-by-event
 * series is not kept in a result (a large plan has millions of events) and is not re-simulated for an export.
 * Lines starting with `#` before the header say what each column is (pandas: `read_csv(path, comment='#')`).
 *
 * Note [CSV injection]
 * A spreadsheet runs a cell that starts with `=`, `+`, `-` or `@` (and, in some, tab or carriage return) as a
 * formula: a plan named `=HYPERLINK(...)` would be a live link, `=cmd|' /C calc'!A0` worse. As OWASP recommends, user
 * text in a cell that starts so is prefixed with `'` (shown as text) and quoted. The comment lines are not cells to
 * pandas but are to a spreadsheet, split at commas: each comma-separated piece of user text in them is treated the
 * same way. Numbers are written as they are (a negative number is a number, not a formula).
 *
 * Pure (no DOM): the renderer and the tests call it.
 */
import type { Timeline } from '../../../engine/result/index.ts';

export interface TimelineCsvOptions {
  /** The plan (or snapshot) the timeline is of: written in a comment line. */
  title?: string;
  /** What produced the timeline: `simulate` or `replay`. */
  kind?: string;
}

/** The columns, in order, with what each holds (the comment lines repeat these). */
export const TIMELINE_CSV_COLUMNS = [
  ['point', 'row number, from 0'],
  ['event_first', "the first allocator event in this point's bucket (a simulation counts events from 1, a replay from 0)"],
  ['event_last', "the last allocator event in this point's bucket"],
  ['step', 'the training step (0: loading the model; always 0 in a replay)'],
  ['phase', 'the phase of the step: load, forward, backward, optimizer, zero_grad (trace for a replay)'],
  ['allocated_min_bytes', 'the least memory allocated to tensors over the bucket (torch.cuda.memory_allocated())'],
  ['allocated_max_bytes', 'the most memory allocated to tensors over the bucket'],
  ['reserved_min_bytes', "the least memory the caching allocator reserved over the bucket (torch.cuda.memory_reserved())"],
  ['reserved_max_bytes', 'the most memory the caching allocator reserved over the bucket'],
] as const;

const REAL_COLUMNS = [
  ['real_reserved_min_bytes', 'a replay: the least memory the real run reserved over the bucket'],
  ['real_reserved_max_bytes', 'a replay: the most memory the real run reserved over the bucket'],
] as const;

/** How a cell a spreadsheet would run as a formula starts (Note [CSV injection]); quotes and spaces before `=` too. */
const FORMULA_START = /^["\s]*[=+\-@]|^[\t\r]/;

/**
 * A CSV field: text that a spreadsheet would run as a formula is prefixed with `'` (Note [CSV injection]); quoted
 * when it holds a comma, a quote or a line break (RFC 4180). Numbers are written as they are.
 */
export function csvField(value: string | number): string {
  if (typeof value === 'number') return String(value);
  const text = FORMULA_START.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/** A comment line: one line, whatever the text holds, and no piece between commas a formula (Note [CSV injection]). */
function comment(text: string): string {
  const line = text.replace(/[\r\n]+/g, ' ');
  return `# ${line
    .split(',')
    .map((piece, i) => (i > 0 && FORMULA_START.test(piece) ? `'${piece}` : piece))
    .join(',')}`;
}

/** The timeline as CSV (Note [Timeline CSV resolution]): comment lines, the header, one row per point; CRLF-free. */
export function timelineCsv(timeline: Timeline, options: TimelineCsvOptions = {}): string {
  const n = timeline.event.length;
  const real = timeline.real_reserved_min !== undefined && timeline.real_reserved_max !== undefined;
  const columns = real ? [...TIMELINE_CSV_COLUMNS, ...REAL_COLUMNS] : TIMELINE_CSV_COLUMNS;
  const firstEvent = n > 0 ? timeline.event[0]! : 0;
  const lines: string[] = [
    comment(`memplan timeline${options.kind ? ` (${options.kind})` : ''}${options.title ? `: ${options.title}` : ''}`),
    comment(
      `${n} rows, decimated: each row is a bucket of consecutive allocator events with the minimum and maximum over it (${timeline.events} events in all); no peak is lost. Bytes are integers.`,
    ),
    ...columns.map(([name, meaning]) => comment(`${name}: ${meaning}`)),
    columns.map(([name]) => name).join(','),
  ];
  for (let i = 0; i < n; i++) {
    const last = i + 1 < n ? timeline.event[i + 1]! - 1 : firstEvent + timeline.events - 1;
    const row: (string | number)[] = [
      i,
      timeline.event[i]!,
      Math.max(timeline.event[i]!, last),
      timeline.step[i]!,
      timeline.phases[timeline.phase[i]!] ?? '',
      timeline.allocated_min[i]!,
      timeline.allocated_max[i]!,
      timeline.reserved_min[i]!,
      timeline.reserved_max[i]!,
    ];
    if (real) row.push(timeline.real_reserved_min![i]!, timeline.real_reserved_max![i]!);
    lines.push(row.map(csvField).join(','));
  }
  return lines.join('\n') + '\n';
}
