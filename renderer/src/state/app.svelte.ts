/**
 * The one window's state, shared by its components: the plan being edited, the engine, the saved plans, the
 * preferences and the toasts. Problems of the plan are gathered here by field path for the fields to show.
 */
import { PlanEditor } from './plan-editor.svelte.ts';
import { EngineClient } from './engine.svelte.ts';
import { library } from './library.svelte.ts';
import { compare } from './compare.svelte.ts';
import { settings } from './settings.svelte.ts';
import { toasts } from './toasts.svelte.ts';
import { localizeIssue } from '../i18n/issues.ts';

export const editor = new PlanEditor();
editor.markSaved(null);
export const engine = new EngineClient();
export { compare, library, settings, toasts };

export interface ShownIssue {
  path: string;
  message: string;
}

class Problems {
  /** Every problem of the plan as it is now: found here, by the engine's schema, or by the engine's model. */
  all: ShownIssue[] = $derived.by(() => {
    const m = settings.m;
    const out: ShownIssue[] = editor.localIssues.map((i) => ({ path: i.path, message: localizeIssue(i.message, m, settings.locale) }));
    if (editor.sendable) {
      for (const i of engine.issues) out.push({ path: normalizePath(i.path), message: localizeIssue(i.message, m, settings.locale) });
      const e = engine.error;
      if (e) {
        const where = e.where ?? '';
        const message = where && e.message.startsWith(`${where}: `) ? e.message.slice(where.length + 2) : e.message;
        out.push({ path: normalizePath(where), message: localizeIssue(message, m, settings.locale) });
      }
    }
    return out;
  });

  /** The problems of one field (its exact path). */
  at(path: string): string[] {
    return this.all.filter((i) => i.path === path).map((i) => i.message);
  }

  /** The problems of a field and everything inside it (a config.json's keys). */
  under(path: string): ShownIssue[] {
    return this.all.filter((i) => i.path === path || i.path.startsWith(`${path}.`) || i.path.startsWith(`${path}[`));
  }

  /** How many problems are in one section of the editor. */
  countIn(prefixes: string[]): number {
    return this.all.filter((i) => prefixes.some((p) => i.path === p || i.path.startsWith(`${p}.`) || i.path.startsWith(`${p}[`))).length;
  }
}

/** Paths arrive as `training.batch_size`, `model.layers[0].in_features` or as arrays of keys. */
export function normalizePath(path: unknown): string {
  if (Array.isArray(path)) return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join('');
  return String(path ?? '');
}

export const problems = new Problems();
