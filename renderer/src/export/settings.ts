/**
 * A plan's settings as rows of `key = value` (`training.batch_size = 8`), for the reports' settings tables and the
 * comparison's "which settings differ". Pure (no DOM).
 *
 * The plan file is flattened as written (docs/plan-format.md): nested objects become dotted keys, lists of plain
 * values are joined, a layer list is summarised by its length and a fingerprint (two different layer lists never
 * read as equal; the list itself is in the plan's JSON export). `format` and `version` say nothing about memory.
 */

export interface SettingRow {
  key: string;
  value: string;
}

const SKIPPED = new Set(['format', 'version', 'name']);

/** FNV-1a of a string, as 8 hex digits: a fingerprint for values too long for a table cell. */
export function fingerprint(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0).toString(16).padStart(8, '0');
}

function scalar(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'string') return value;
  return String(value);
}

function flatten(value: unknown, key: string, rows: SettingRow[]): void {
  if (Array.isArray(value)) {
    if (value.every((v) => v === null || typeof v !== 'object')) rows.push({ key, value: value.map(scalar).join(', ') });
    else rows.push({ key, value: `${value.length} items · #${fingerprint(JSON.stringify(value))}` });
  } else if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>);
    if (entries.length === 0) rows.push({ key, value: '{}' });
    for (const [k, v] of entries) flatten(v, key ? `${key}.${k}` : k, rows);
  } else rows.push({ key, value: scalar(value) });
}

/** The plan's settings in file order (`model.preset`, `training.batch_size`, `gpu.name`, ...). */
export function planSettings(plan: Record<string, unknown>): SettingRow[] {
  const rows: SettingRow[] = [];
  for (const [k, v] of Object.entries(plan)) if (!SKIPPED.has(k)) flatten(v, k, rows);
  return rows;
}

/**
 * The settings of several plans side by side: every key any plan has, in the order first seen, each with one
 * value per plan (null: not set in that plan) and whether they differ.
 */
export function settingsSideBySide(plans: readonly Record<string, unknown>[]): { key: string; values: (string | null)[]; differs: boolean }[] {
  const perPlan = plans.map((p) => new Map(planSettings(p).map((r) => [r.key, r.value])));
  const keys = [...new Set(perPlan.flatMap((m) => [...m.keys()]))];
  return keys.map((key) => {
    const values = perPlan.map((m) => m.get(key) ?? null);
    return { key, values, differs: values.some((v) => v !== values[0]) };
  });
}
