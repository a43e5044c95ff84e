/**
 * A comparison's report as Markdown: two to four plans side by side, the first the one the others are measured
 * against. Settings that differ (the rest counted), the numbers with each difference to the first plan in bytes
 * and %, what fills memory at each plan's peak, the largest batch when searched, a "what changed" sentence per plan
 * (worded by the caller, from the engine's attribution), and the comparison's charts as images beside the .md.
 * User text is escaped (Note [User text in reports]). Pure (no DOM).
 */
import type { MaxBatchResult, SimulateResult } from '../../../engine/result/index.ts';
import type { Locale } from '../i18n/types.ts';
import { CATEGORIES } from '../charts/categories.ts';
import { categoryName } from '../results/words.ts';
import { bold, bulletList, document, escapeText, heading, image, raw, table, type Inline } from './markdown.ts';
import { settingsSideBySide } from './settings.ts';
import { reportWords, type ReportImage, type ReportWords } from './words.ts';

export interface ComparedPlanReport {
  name: string;
  /** The plan file (with its defaults filled in when it parses, so a default and its explicit value read alike). */
  plan: Record<string, unknown>;
  simulation: SimulateResult | null;
  maxBatch?: MaxBatchResult | null;
  /** As the saved comparison reports it (ipc.ts `comparedPlanSchema`); default `current`. */
  status?: 'current' | 'edited' | 'deleted' | 'damaged';
  /** This plan against the first, in a sentence (already worded in the report's language); null or absent: none. */
  whatChanged?: string | null;
}

export interface ComparisonReportInput {
  name: string;
  /** In column order; the first is the baseline. */
  plans: readonly ComparedPlanReport[];
  /** Charts saved beside the report (the overlaid timelines, the batch curves), in the order they appear. */
  images?: readonly ReportImage[];
  locale: Locale;
  generatedAt: Date;
}

/** `7.53 GiB` for the first plan; `6.20 GiB (−1.33 GiB, −17.7%)` for the others. */
function againstFirst(w: ReportWords, value: number | undefined, base: number | undefined, isFirst: boolean): string {
  if (value === undefined) return '—';
  if (isFirst || base === undefined) return w.bytes(value);
  const diff = value - base;
  return `${w.bytes(value)} (${w.signedBytes(diff)}${base !== 0 ? `, ${w.signedPercent(diff / base)}` : ''})`;
}

function batchAgainstFirst(w: ReportWords, value: number | undefined, base: number | undefined, isFirst: boolean): string {
  if (value === undefined) return '—';
  if (isFirst || base === undefined) return w.count(value);
  const diff = value - base;
  return `${w.count(value)} (${diff > 0 ? '+' : ''}${w.count(diff)}${base !== 0 ? `, ${w.signedPercent(diff / base)}` : ''})`;
}

function statusNote(w: ReportWords, p: ComparedPlanReport): string | null {
  return p.status === 'edited' ? w.x.xStatusEdited : p.status === 'deleted' || p.status === 'damaged' ? w.x.xStatusDeleted : null;
}

export function comparisonReport(input: ComparisonReportInput): string {
  const w = reportWords(input.locale);
  const plans = input.plans;
  const first = plans[0];
  const header: Inline[] = [w.x.xQuantity, ...plans.map((p, i) => raw(`${i + 1}. ${escapeText(p.name)}`))];
  const align = ['left' as const, ...plans.map(() => 'right' as const)];

  const settings = settingsSideBySide(plans.map((p) => p.plan), input.locale);
  const differing = settings.filter((s) => s.differs);
  const same = settings.length - differing.length;

  const sims = plans.map((p) => p.simulation);
  const numberRow = (label: string, pick: (s: SimulateResult) => number): Inline[] => {
    const base = sims[0] ? pick(sims[0]) : undefined;
    return [label, ...sims.map((s, i) => againstFirst(w, s ? pick(s) : undefined, base, i === 0))];
  };
  const batchRow = (label: string, pick: (m: MaxBatchResult) => number): Inline[] => {
    const base = first?.maxBatch ? pick(first.maxBatch) : undefined;
    return [label, ...plans.map((p, i) => batchAgainstFirst(w, p.maxBatch ? pick(p.maxBatch) : undefined, base, i === 0))];
  };
  const searched = plans.some((p) => p.maxBatch);

  const numbers = table(
    header,
    [
      [w.x.xGpu, ...sims.map((s) => s?.gpu.name ?? '—')],
      [w.x.xFits, ...sims.map((s) => (s ? (s.fits ? w.x.xYes : w.x.xNo) : '—'))],
      // how sure memplan is of each (its grounds are in each plan's own report); '—' for results stored before
      [w.x.xConfidence, ...sims.map((s) => (s?.caveats ? w.r.rConfidence(s.caveats.confidence) : '—'))],
      numberRow(w.r.rPeakAllocated, (s) => s.peak_allocated_bytes),
      numberRow(w.r.rPeakReserved, (s) => s.peak_reserved_bytes),
      numberRow(w.r.rNvidiaSmi, (s) => s.nvidia_smi_bytes),
      numberRow(w.x.xCap, (s) => s.gpu.cap_bytes),
      numberRow(w.r.rCatParameter, (s) => s.breakdown_at_peak.parameter),
      numberRow(w.r.rCatGradient, (s) => s.breakdown_at_peak.gradient),
      numberRow(w.r.rCatOptimizerState, (s) => s.breakdown_at_peak.optimizer_state),
      numberRow(w.r.rCatActivation, (s) => s.breakdown_at_peak.activation),
      ...(searched ? [batchRow(w.r.rMaxMicroBatch, (m) => m.max_batch), batchRow(w.r.rRecommended, (m) => m.recommendation.batch)] : []),
    ],
    align,
  );

  const breakdown = table(
    [w.x.xCategory, ...header.slice(1)],
    CATEGORIES.filter((c) => sims.some((s) => s && s.breakdown_at_peak[c] > 0)).map((c) => [
      categoryName(w.r, c),
      ...sims.map((s) => (s ? `${w.bytes(s.breakdown_at_peak[c])}${s.peak_reserved_bytes > 0 ? ` (${w.percent(s.breakdown_at_peak[c] / s.peak_reserved_bytes)})` : ''}` : '—')),
    ]),
    align,
  );

  const changes = plans.slice(1).flatMap((p, i) => (p.whatChanged ? [raw(`**${i + 2}. ${escapeText(p.name)}**: ${escapeText(p.whatChanged)}`)] : []));

  return document([
    heading(1, input.name),
    escapeText(w.x.xComparisonGenerated(w.date(input.generatedAt), plans.length)),
    heading(2, w.x.xPlans),
    plans.map((p, i) => `${i + 1}. ${escapeText(p.name).replace(/ {2}\n/g, ' ')}${statusNote(w, p) ? ` (${escapeText(statusNote(w, p)!)})` : ''}`).join('\n'),

    heading(2, w.x.xSettings),
    differing.length > 0 ? table([w.x.xSetting, ...header.slice(1)], differing.map((s) => [s.label, ...s.values.map((v) => v ?? w.x.xNotSet)])) : null,
    same > 0 ? escapeText(w.x.xSameSettings(same)) : null,

    heading(2, w.x.xMemory),
    numbers,
    heading(3, w.x.xBreakdownByPlan),
    breakdown,

    changes.length > 0 ? document([heading(2, w.x.xWhatChanged), bulletList(changes)]).trimEnd() : null,
    ...(input.images ?? []).map((img) => document([heading(3, img.alt), image(img.alt, img.file)]).trimEnd()),
  ]);
}
