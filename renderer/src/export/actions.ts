/**
 * The exports the user asks for, from the application menu (File > Export) and from the result views: the
 * timeline as CSV, a chart as PNG, the plan's report as Markdown with its charts beside it. (The plan file itself:
 * state/commands.ts `exportPlan`.) Files are written by the main process through its save dialogs
 * (`files.saveText`, `files.saveBytes`, `files.saveReport`); this module builds what they write.
 */
import { parseGpuCatalog, safeParsePlan } from '../../../engine/index.ts';
import catalogJson from '../../../resources/gpus.json';
import { api } from '../lib/api.ts';
import { editor, engine, settings, toasts } from '../state/app.svelte.ts';
import { suggestedName } from '../state/commands.ts';
import { timelineCsv } from './csv.ts';
import { fileStem } from './markdown.ts';
import { canvasToPng } from './png.ts';
import { planReport } from './report.ts';
import { reportWords, type ReportImage } from './words.ts';

const catalog = parseGpuCatalog(catalogJson);

function x() {
  return reportWords(settings.locale).x;
}

function failed(error: unknown): void {
  toasts.show((error as Error).message ?? String(error), { tone: 'error', ms: 6000 });
}

function planName(): string {
  return editor.name.trim() || suggestedName();
}

/** The plan file as plain data, with its defaults filled in when it parses (what was simulated). */
function planForReport(name: string): Record<string, unknown> {
  const plain = JSON.parse(JSON.stringify({ ...editor.plan, name })) as Record<string, unknown>;
  const parsed = safeParsePlan(plain, { catalog });
  return parsed.ok ? (JSON.parse(JSON.stringify(parsed.plan)) as Record<string, unknown>) : plain;
}

/** The chart canvases on screen in the results column: the timeline's, the batch curve's. */
function chartCanvas(which: 'timeline' | 'batch_curve' | 'any'): HTMLCanvasElement | null {
  const selector = which === 'timeline' ? '[data-testid="timeline-card"] canvas' : which === 'batch_curve' ? '[data-testid="max-batch"] canvas' : 'section.results canvas';
  return document.querySelector<HTMLCanvasElement>(selector);
}

/** FNV-1a of bytes as 8 hex digits: a short fingerprint for an image's file name. */
function fingerprintBytes(bytes: Uint8Array): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < bytes.length; i++) h = Math.imul(h ^ bytes[i]!, 0x01000193);
  return (h >>> 0).toString(16).padStart(8, '0');
}

function arrayBuffer(bytes: Uint8Array): ArrayBuffer {
  return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
}

/** The simulated timeline as CSV (Note [Timeline CSV resolution]). */
export async function exportTimelineCsv(): Promise<void> {
  const memplan = api();
  const result = engine.simulation;
  if (!memplan) return;
  if (!result) return void toasts.show(x().xNothingToExport, { tone: 'error' });
  const name = planName();
  try {
    const saved = await memplan.files.saveText({
      suggested_name: `${fileStem(name)}.timeline.csv`,
      text: timelineCsv(result.timeline, { title: name, kind: result.kind }),
      filters: [{ name: 'CSV', extensions: ['csv'] }],
    });
    if (saved) toasts.show(x().xSaved(saved.name));
  } catch (error) {
    failed(error);
  }
}

/**
 * A chart as PNG: `canvas` (a chart's own button passes its canvas), else the first chart on screen in the results
 * (the timeline in the Memory view, the batch curve in the Max batch view). `label` names the file.
 */
export async function exportChartPng(canvas: HTMLCanvasElement | null = null, label = 'chart'): Promise<void> {
  const memplan = api();
  if (!memplan) return;
  const target = canvas ?? chartCanvas('any');
  if (!target) return void toasts.show(x().xNoChart, { tone: 'error' });
  const kind = canvas ? label : target.closest('[data-testid="max-batch"]') ? 'batch-curve' : 'timeline';
  try {
    const bytes = await canvasToPng(target);
    const saved = await memplan.files.saveBytes({
      suggested_name: `${fileStem(planName())}.${kind}.png`,
      bytes: arrayBuffer(bytes),
      filters: [{ name: 'PNG', extensions: ['png'] }],
    });
    if (saved) toasts.show(x().xSaved(saved.name));
  } catch (error) {
    failed(error);
  }
}

/**
 * The plan's report: Markdown, with the charts on screen saved as PNG images beside it. Image names carry the
 * report's name and a fingerprint of the image, so two reports in one folder never overwrite each other's images.
 */
export async function exportReport(): Promise<void> {
  const memplan = api();
  if (!memplan) return;
  const name = planName();
  const stem = fileStem(name);
  const w = reportWords(settings.locale);
  try {
    const images: { name: string; bytes: ArrayBuffer }[] = [];
    const capture = async (which: 'timeline' | 'batch_curve', alt: string): Promise<ReportImage | undefined> => {
      const canvas = chartCanvas(which);
      if (!canvas) return undefined;
      const bytes = await canvasToPng(canvas);
      const file = `${stem.slice(0, 60)}-${which.replace('_', '-')}-${fingerprintBytes(bytes)}.png`;
      images.push({ name: file, bytes: arrayBuffer(bytes) });
      return { file, alt };
    };
    const timeline = engine.simulation ? await capture('timeline', w.r.rTimelineTitle) : undefined;
    const batchCurve = engine.maxBatch ? await capture('batch_curve', w.r.rCurveTitle) : undefined;
    const text = planReport({
      name,
      notes: editor.notes,
      tags: [...editor.tags],
      plan: planForReport(name),
      simulation: engine.stale ? null : engine.simulation,
      maxBatch: engine.maxBatch,
      advice: engine.adviceDone ? engine.advice : [],
      images: { timeline, batchCurve },
      locale: settings.locale,
      generatedAt: new Date(),
    });
    const saved = await memplan.files.saveReport({ suggested_name: `${stem}.md`, text, images });
    if (saved) toasts.show(w.x.xReportSaved(saved.name, saved.images.length));
  } catch (error) {
    failed(error);
  }
}
