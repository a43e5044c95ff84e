/**
 * A plan's report as Markdown: its settings, its memory (the three peaks, the GPU's cap, where the peak is), what
 * fills memory at the peak, the largest batch when it was searched, the advice, and its charts as PNG images saved
 * beside the .md file. User text (name, notes, tags, setting values) is escaped (Note [User text in reports]).
 * Pure (no DOM): the caller renders the charts (png.ts) and saves the files (actions.ts).
 */
import { partlyTrainable, type AdviceItem, type Caveats, type MaxBatchResult, type SimulateResult } from '../../../engine/result/index.ts';
import type { Locale } from '../i18n/types.ts';
import { CATEGORIES } from '../charts/categories.ts';
import { adviceWords, caveatWords, categoryName, noteText, phaseName } from '../results/words.ts';
import { bold, bulletList, code, document, escapeText, heading, image, raw, table, type Inline } from './markdown.ts';
import { planSettings } from './settings.ts';
import { reportWords, type ReportImage, type ReportWords } from './words.ts';

export interface PlanReportInput {
  name: string;
  notes?: string;
  tags?: readonly string[];
  /** The plan file (with its defaults filled in when it parses: engine's safeParsePlan), for the settings table. */
  plan: Record<string, unknown>;
  /** The plan's simulation, or null (not simulated, or problems). */
  simulation: SimulateResult | null;
  maxBatch?: MaxBatchResult | null;
  advice?: readonly AdviceItem[];
  /** Charts saved beside the report. */
  images?: { timeline?: ReportImage; batchCurve?: ReportImage };
  locale: Locale;
  generatedAt: Date;
}

/** The three peaks and the GPU's figures as rows of (name, readable size, exact bytes). */
export function memoryRows(w: ReportWords, s: SimulateResult): Inline[][] {
  const size = (label: string, bytes: number): Inline[] => [label, w.bytes(bytes), bytes];
  return [
    size(w.r.rPeakAllocated, s.peak_allocated_bytes),
    size(w.r.rPeakReserved, s.peak_reserved_bytes),
    size(w.r.rNvidiaSmi, s.nvidia_smi_bytes),
    size(w.x.xCap, s.gpu.cap_bytes),
    size(w.r.rHeadroom, s.headroom_bytes),
  ];
}

function breakdownTable(w: ReportWords, s: SimulateResult): string {
  const rows = CATEGORIES.filter((c) => s.breakdown_at_peak[c] > 0).map((c) => {
    const bytes = s.breakdown_at_peak[c];
    return [categoryName(w.r, c), w.bytes(bytes), bytes, s.peak_reserved_bytes > 0 ? w.percent(bytes / s.peak_reserved_bytes) : ''];
  });
  return table([w.x.xCategory, w.x.xSize, w.x.xBytes, w.x.xShare], rows, ['left', 'right', 'right', 'right']);
}

function maxBatchSection(w: ReportWords, mb: MaxBatchResult, img: ReportImage | undefined): string {
  const rec = mb.recommendation;
  const rows: Inline[][] = [
    [w.x.xGpu, mb.gpu.name],
    [w.r.rMaxMicroBatch, mb.max_batch],
    [w.r.rEffectiveBatch, mb.grad_accumulation_steps > 1 ? `${w.count(mb.effective_batch)} (${w.r.rEffectiveBatchDetail(w.count(mb.max_batch), mb.grad_accumulation_steps)})` : w.count(mb.effective_batch)],
    [w.r.rRecommended, rec.batch],
  ];
  const why =
    rec.reason_id === 'keeps_margin'
      ? w.r.rRecKeepsMargin(w.percent(rec.safety_margin), w.bytes(rec.margin_bytes), w.bytes(rec.headroom_bytes))
      : rec.reason_id === 'margin_not_kept'
        ? w.r.rRecMarginNotKept(w.percent(rec.safety_margin), w.bytes(rec.headroom_bytes))
        : w.r.rNothingFitsDetail(mb.gpu.name, w.bytes(mb.cap_bytes));
  return document([
    heading(2, w.r.rSearchTitle),
    table([w.x.xQuantity, w.x.xValue], rows, ['left', 'right']),
    escapeText(why + (rec.multiple_of > 1 ? ` ${w.r.rRecRounded(rec.multiple_of)}` : '') + (mb.reached_upper_bound ? ` ${w.r.rUpperBound}` : '')),
    img ? image(img.alt, img.file) : null,
  ]).trimEnd();
}

/**
 * What the answer assumes and how sure memplan is, as the result view's Caveats card says it: the confidence with
 * its grounds, then the assumptions. `gpu` names the catalog id the caveats use as PyTorch prints it.
 */
export function caveatsSection(w: ReportWords, caveats: Caveats, gpu: { id: string; name: string } | null): string {
  const words = caveats.items.map((c) => caveatWords(w.r, c, w.locale, (id) => (gpu && id === gpu.id ? gpu.name : id)));
  const grounds = words.filter((c) => c.kind === 'ground').map((c) => c.text);
  const assumptions = words.filter((c) => c.kind === 'assumption').map((c) => c.text);
  return document([
    heading(2, w.r.rCaveatsTitle),
    bold(w.r.rConfidence(caveats.confidence)).markdown,
    grounds.length > 0 ? document([escapeText(w.r.rConfidenceWhy), bulletList(grounds)]).trimEnd() : null,
    document([escapeText(w.r.rAssumes), bulletList(assumptions)]).trimEnd(),
  ]).trimEnd();
}

/** The advice as a table: the change, the exact setting, the peak reserved with it, what it saves, fits. */
export function adviceTable(w: ReportWords, items: readonly AdviceItem[]): string {
  const withBatch = items.some((a) => a.max_batch !== undefined);
  const rows = items.map((a) => {
    const words = adviceWords(w.r, a, w.locale);
    return [
      words.detail ? `${words.title} (${words.detail})` : words.title,
      words.code ? code(words.code) : '',
      w.bytes(a.peak_reserved_bytes),
      w.signedBytes(a.saved_bytes),
      a.fits ? w.x.xYes : w.x.xNo,
      ...(withBatch ? [a.max_batch ?? ''] : []),
    ] as Inline[];
  });
  const header = [w.x.xChange, w.x.xUse, w.x.xPeakReservedWith, w.x.xSavesColumn, w.x.xFits, ...(withBatch ? [w.r.rMaxMicroBatch] : [])];
  return table(header, rows, ['left', 'left', 'right', 'right', 'left', 'right']);
}

/** The plan's settings as the compare view names them; a plan that does not parse says so (its JSON export has it). */
function settingsTable(w: ReportWords, plan: unknown): string {
  const rows = planSettings(plan, w.locale);
  if (rows === null) return escapeText(w.x.xSettingsUnreadable);
  return table([w.x.xSetting, w.x.xValue], rows.map((r) => [r.label, r.value]));
}

/** What trains, where not everything does: the count and PEFT's trainable% (four decimals). */
function trainableRows(w: ReportWords, model: SimulateResult['model']): string[][] {
  const t = partlyTrainable(model);
  return t === null ? [] : [[w.x.xTrainableCount, w.r.rTrainable(w.count(t), w.percent(t / model.parameter_count, 4))]];
}

export function planReport(input: PlanReportInput): string {
  const w = reportWords(input.locale);
  const s = input.simulation;
  const tags = (input.tags ?? []).filter((t) => t.trim().length > 0);
  // null in results stored before memplan reported caveats
  const caveats = s?.caveats ?? input.maxBatch?.caveats ?? null;
  return document([
    heading(1, input.name),
    escapeText(w.x.xGenerated(w.date(input.generatedAt))),
    tags.length > 0 ? `${bold(w.x.xTags).markdown}: ${tags.map((t) => escapeText(t)).join(', ')}` : null,
    input.notes?.trim() ? document([heading(2, w.x.xPlanNotes), escapeText(input.notes.trim())]).trimEnd() : null,

    heading(2, w.x.xSettings),
    settingsTable(w, input.plan),

    heading(2, w.x.xMemory),
    s
      ? document([
          table(
            [w.x.xQuantity, w.x.xValue],
            [
              [w.x.xGpu, s.gpu.name],
              [w.x.xFits, s.fits ? w.x.xYes : w.x.xNo],
              [w.x.xPeakAt, w.r.rPeakAt(s.peak_at.step, phaseName(w.r, s.peak_at.phase))],
              [w.x.xParameterCount, w.r.rParameters(w.count(s.model.parameter_count), w.bytes(s.model.parameter_bytes))],
              ...trainableRows(w, s.model),
            ],
          ),
          table([w.x.xQuantity, w.x.xSize, w.x.xBytes], memoryRows(w, s), ['left', 'right', 'right']),
          heading(3, w.r.rBreakdownTitle),
          breakdownTable(w, s),
          input.images?.timeline ? document([heading(3, w.r.rTimelineTitle), image(input.images.timeline.alt, input.images.timeline.file), escapeText(w.x.xTimelineCsvNote)]).trimEnd() : null,
        ]).trimEnd()
      : escapeText(w.x.xNoResult),

    input.maxBatch ? maxBatchSection(w, input.maxBatch, input.images?.batchCurve) : null,
    caveats ? caveatsSection(w, caveats, s?.gpu ?? input.maxBatch?.gpu ?? null) : null,

    input.advice && input.advice.length > 0 ? document([heading(2, w.x.xAdvice), adviceTable(w, input.advice)]).trimEnd() : null,
    s && s.notes.length > 0 ? document([heading(2, w.r.rNotesTitle), bulletList(s.notes.map((n) => noteText(w.r, n, w.locale)))]).trimEnd() : null,
    s ? document([heading(2, 'torch.cuda.memory_summary()'), raw('```text\n' + s.memory_summary.replace(/```/g, "'''") + '\n```').markdown]).trimEnd() : null,
  ]);
}
