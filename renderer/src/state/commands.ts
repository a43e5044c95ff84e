/**
 * What the user can do to plans, from buttons, shortcuts and the application menu alike: save, save as, open,
 * new, rename, duplicate, delete (with Undo), simulate now, search the largest batch.
 */
import { PRESETS } from '../../../engine/index.ts';
import { isObject } from './kept-keys.ts';
import catalog from '../../../resources/gpus.json';
import { api, type SavedPlanSummary } from '../lib/api.ts';
import { editor, engine, library, settings, toasts } from './app.svelte.ts';

/** A name for a plan the user has not named: what it trains, how, and where. */
export function suggestedName(): string {
  const model =
    editor.modelMode === 'preset'
      ? editor.preset
      : editor.modelMode === 'torchvision'
        ? editor.torchvision
        : editor.modelMode === 'hf_config'
          ? String((editor.hfParsed.ok && (editor.hfParsed.value as { model_type?: unknown })?.model_type) || 'config.json')
          : 'layers';
  const precision = editor.precision.replace('amp_', 'AMP ');
  const gpu = editor.gpuMode === 'catalog' ? (catalog.gpus.find((g) => g.id === editor.gpuName)?.id ?? editor.gpuName) : `${editor.customGiB ?? '?'} GiB`;
  return `${model} · ${precision} · bs ${editor.batchSize ?? '?'} · ${gpu}`;
}

function failed(error: unknown): void {
  toasts.show((error as Error).message ?? String(error), { tone: 'error', ms: 6000 });
}

/** Plain data, as IPC (structured clone) needs it: the editor's fields are Svelte state proxies. */
function plain<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

function planWithName(name: string): Record<string, unknown> {
  return plain({ ...editor.plan, name });
}

export async function savePlan({ asNew = false } = {}): Promise<void> {
  const memplan = api();
  if (!memplan) return;
  const baseName = editor.name.trim() || suggestedName();
  const name = asNew && editor.savedId !== null ? settings.m.copyOf(baseName) : baseName;
  try {
    const saved = await memplan.plans.save({
      ...(asNew || editor.savedId === null ? {} : { id: editor.savedId }),
      name,
      plan: planWithName(name),
      result: engine.simulation && !engine.stale ? engine.simulation : null,
      notes: editor.notes,
      tags: plain(editor.tags),
    });
    editor.name = name;
    editor.markSaved(saved.id);
    toasts.show(settings.m.toastSaved(name));
    await library.refresh();
  } catch (error) {
    failed(error);
  }
}

export async function openPlan(id: SavedPlanSummary['id']): Promise<void> {
  const memplan = api();
  if (!memplan || id === editor.savedId) return;
  if (editor.dirty && !confirm(settings.m.discardChanges)) return;
  try {
    const saved = await memplan.plans.get({ id });
    if (!saved) return;
    editor.load((saved.plan ?? {}) as Record<string, unknown>, { id: saved.id, name: saved.name, notes: saved.notes ?? '', tags: saved.tags ?? [] });
    engine.resetSearch();
    engine.requestSimulate(editor.plan, { immediate: true, force: true });
  } catch (error) {
    failed(error);
  }
}

export function newPlan(): void {
  if (editor.dirty && !confirm(settings.m.discardChanges)) return;
  editor.reset();
  engine.resetSearch();
}

export async function renamePlan(item: SavedPlanSummary, name: string): Promise<void> {
  const memplan = api();
  const trimmed = name.trim();
  if (!memplan || !trimmed || trimmed === item.name) return;
  try {
    await memplan.plans.rename({ id: item.id, name: trimmed });
    if (item.id === editor.savedId) {
      const wasDirty = editor.dirty;
      editor.name = trimmed;
      if (!wasDirty) editor.markSaved(item.id);
    }
    toasts.show(settings.m.toastRenamed(trimmed));
    await library.refresh();
  } catch (error) {
    failed(error);
  }
}

export async function duplicatePlan(item: SavedPlanSummary): Promise<void> {
  const memplan = api();
  if (!memplan) return;
  try {
    const copy = await memplan.plans.duplicate({ id: item.id, name: settings.m.copyOf(item.name) });
    toasts.show(settings.m.toastDuplicated(copy.name));
    await library.refresh();
  } catch (error) {
    failed(error);
  }
}

export async function deletePlan(item: SavedPlanSummary): Promise<void> {
  const memplan = api();
  if (!memplan) return;
  try {
    const undoToken = await memplan.plans.delete({ id: item.id });
    if (item.id === editor.savedId) editor.markSaved(null);
    await library.refresh();
    toasts.show(settings.m.toastDeleted(item.name), {
      action: {
        label: settings.m.undo,
        run: async () => {
          try {
            await memplan.plans.restore(undoToken);
            toasts.show(settings.m.toastRestored(item.name));
            await library.refresh();
          } catch (error) {
            failed(error);
          }
        },
      },
    });
  } catch (error) {
    failed(error);
  }
}

export function simulateNow(): void {
  if (editor.sendable) engine.requestSimulate(editor.plan, { immediate: true, force: true });
}

export function findMaxBatch(): void {
  if (engine.searching) return;
  if (editor.sendable) engine.startMaxBatch(editor.plan);
}

export function focusSearch(): void {
  const input = document.getElementById('plan-search') as HTMLInputElement | null;
  input?.focus();
  input?.select();
}

export function presetLabel(id: string): string {
  const p = PRESETS[id];
  return p ? `${id} · ${p.parameters}` : id;
}
export function cancelSearch(): void {
  engine.cancelMaxBatch();
}

/** A plan file from disk (menu: Open plan…): read into the editor as a new, unsaved plan. */
export async function openPlanFile(): Promise<void> {
  const memplan = api();
  if (!memplan) return;
  if (editor.dirty && !confirm(settings.m.discardChanges)) return;
  try {
    const file = await memplan.files.openText({ purpose: 'plan' });
    if (!file) return;
    let value: unknown;
    try {
      value = JSON.parse(file.text);
    } catch (error) {
      toasts.show(settings.m.fileNotJson(file.name, (error as Error).message), { tone: 'error', ms: 8000 });
      return;
    }
    if (!isObject(value)) {
      toasts.show(settings.m.fileNotPlanObject(file.name), { tone: 'error', ms: 8000 });
      return;
    }
    editor.load(value, { id: null, name: (typeof value.name === 'string' && value.name) || file.name.replace(/\.json$/i, '') });
    engine.resetSearch();
    editor.markSaved(null);
  } catch (error) {
    failed(error);
  }
}

/** The plan as its file (menu: Export plan…), in the plan file format. */
export async function exportPlan(): Promise<void> {
  const memplan = api();
  if (!memplan) return;
  const name = editor.name.trim() || suggestedName();
  try {
    const saved = await memplan.files.saveText({
      suggested_name: `${name.replace(/[/\\:*?"<>|\u0000-\u001f]+/g, '-').slice(0, 80)}.plan.json`,
      text: JSON.stringify(planWithName(name), null, 2) + '\n',
      filters: [{ name: 'memplan plan', extensions: ['json'] }],
    });
    if (saved) toasts.show(settings.m.toastExported(saved.name));
  } catch (error) {
    failed(error);
  }
}

/** A config.json from disk (menu: Import config.json…). */
export async function importHfConfig(): Promise<void> {
  const memplan = api();
  if (!memplan) return;
  try {
    const file = await memplan.files.openText({ purpose: 'hf_config' });
    if (!file) return;
    editor.modelMode = 'hf_config';
    editor.hfText = file.text;
  } catch (error) {
    failed(error);
  }
}

export function toggleTheme(): void {
  settings.setTheme(settings.theme === 'dark' ? 'light' : 'dark');
}
