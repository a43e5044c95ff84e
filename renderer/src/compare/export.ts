/**
 * The comparison's Markdown report (export/comparison-report.ts builds the text, the exports' owner's code): the
 * plans as compared, each "what changed" sentence worded as on screen, and the two overlaid charts saved as PNG
 * beside the .md through the main process's save dialog (`files.saveReport`).
 */
import { api } from '../lib/api.ts';
import { compare, settings, toasts } from '../state/app.svelte.ts';
import { comparisonReport, type ComparedPlanReport } from '../export/comparison-report.ts';
import { fileStem } from '../export/markdown.ts';
import { canvasToPng } from '../export/png.ts';
import { reportWords, type ReportImage } from '../export/words.ts';
import { columnLetter, whatChangedSentence } from './words.ts';

function arrayBuffer(bytes: Uint8Array): ArrayBuffer {
  return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
}

export async function exportComparisonReport(): Promise<void> {
  const memplan = api();
  const columns = compare.columns;
  if (!memplan || !columns) return;
  const m = settings.m;
  const locale = settings.locale;
  const name = compare.name.trim() || columns.map((c) => c.name).join(' · ');
  const stem = fileStem(name);
  const w = reportWords(locale);
  try {
    const images: { name: string; bytes: ArrayBuffer }[] = [];
    const shown: ReportImage[] = [];
    for (const [testid, alt, suffix] of [
      ['compare-timeline', m.cmpTimelineTitle, 'timeline'],
      ['compare-batch', m.cmpBatchTitle, 'batch-curves'],
    ] as const) {
      const canvas = document.querySelector<HTMLCanvasElement>(`[data-testid="${testid}"] canvas`);
      if (!canvas) continue;
      const file = `${stem.slice(0, 60)}-${suffix}.png`;
      images.push({ name: file, bytes: arrayBuffer(await canvasToPng(canvas)) });
      shown.push({ file, alt });
    }
    const plans: ComparedPlanReport[] = columns.map((c, i) => ({
      name: `${columnLetter(i)} · ${c.name}`,
      // The plan as simulated: defaults filled in, so a default and its explicit value read alike.
      plan: (c.plan ? JSON.parse(JSON.stringify(c.plan)) : (c.record?.plan ?? {})) as Record<string, unknown>,
      simulation: c.simulation,
      maxBatch: c.maxBatch,
      status: c.status,
      whatChanged: i > 0 && c.attribution ? whatChangedSentence(m, c.attribution, columnLetter(i), columnLetter(0), locale) : null,
    }));
    const text = comparisonReport({ name, plans, images: shown, locale, generatedAt: new Date() });
    const saved = await memplan.files.saveReport({ suggested_name: `${stem}.md`, text, images });
    if (saved) toasts.show(w.x.xReportSaved(saved.name, saved.images.length));
  } catch (error) {
    toasts.show((error as Error).message ?? String(error), { tone: 'error', ms: 6000 });
  }
}
