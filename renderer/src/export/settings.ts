/**
 * A plan's settings for the reports: the engine's rows (engine/compare/settings.ts, defaults applied, the model and
 * the GPU one row each) worded as the compare view words them (compare/words.ts), so a report and the view agree on
 * what a setting is called, what it is and whether two plans differ in it. Pure (no DOM).
 */
import { planSettings as engineSettings, safeParsePlan, SETTING_KEYS, type SettingKey } from '../../../engine/index.ts';
import { catalogues, type Locale } from '../i18n/index.ts';
import { settingLabel, settingValueText } from '../compare/words.ts';

export interface SettingRow {
  key: SettingKey;
  /** The setting's name in the report's language. */
  label: string;
  /** Its value, worded. */
  value: string;
  /** Equal for equal settings (engine/compare: compare this, not the words). */
  canonical: string;
}

/** The plan file's settings, or null when it does not parse (its JSON export has it as it is). */
export function planSettings(plan: unknown, locale: Locale): SettingRow[] | null {
  const parsed = safeParsePlan(plan);
  if (!parsed.ok) return null;
  const m = catalogues[locale];
  return engineSettings(parsed.plan).map((s) => ({ key: s.key, label: settingLabel(m, s.key), value: settingValueText(m, s.key, s.value, locale), canonical: s.canonical }));
}

/**
 * The settings of several plans side by side, in the engine's order: each with one value per plan (null: that plan
 * does not parse) and whether they differ.
 */
export function settingsSideBySide(plans: readonly unknown[], locale: Locale): { key: SettingKey; label: string; values: (string | null)[]; differs: boolean }[] {
  const perPlan = plans.map((p) => planSettings(p, locale));
  const m = catalogues[locale];
  return SETTING_KEYS.map((key) => {
    const rows = perPlan.map((rows) => rows?.find((r) => r.key === key) ?? null);
    const canonical = rows.map((r) => r?.canonical ?? null);
    return { key, label: settingLabel(m, key), values: rows.map((r) => r?.value ?? null), differs: canonical.some((c) => c !== canonical[0]) };
  });
}
