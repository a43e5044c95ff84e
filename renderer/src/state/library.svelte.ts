/**
 * The saved plans, through `window.memplan.plans` (the main process's SQLite). The list follows the search box;
 * deleting is soft and offers an Undo that restores the row.
 */
import { api, type SavedPlanSummary } from '../lib/api.ts';
import { compare } from './compare.svelte.ts';

const SEARCH_DEBOUNCE_MS = 120;

export class Library {
  items = $state.raw<SavedPlanSummary[]>([]);
  query = $state('');
  loading = $state(false);
  error = $state<string | null>(null);
  available = $state(api() !== undefined);
  #timer: ReturnType<typeof setTimeout> | null = null;
  #generation = 0;

  async refresh(): Promise<void> {
    const memplan = api();
    this.available = memplan !== undefined;
    if (!memplan) return;
    const generation = ++this.#generation;
    this.loading = true;
    try {
      const answer = await memplan.plans.list({ query: this.query.trim() });
      if (generation !== this.#generation) return; // a newer search is under way
      this.items = answer.plans;
      // A plan deleted while ticked for comparison is unticked (a search hides plans without deleting them).
      if (!this.query.trim()) compare.keepSelected(new Set(answer.plans.map((p) => p.id)));
      this.error = null;
    } catch (error) {
      if (generation === this.#generation) this.error = (error as Error).message;
    } finally {
      if (generation === this.#generation) this.loading = false;
    }
  }

  search(query: string): void {
    this.query = query;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.refresh(), SEARCH_DEBOUNCE_MS);
  }
}

export const library = new Library();
