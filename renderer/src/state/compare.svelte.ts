/**
 * Comparing saved plans: which plans are ticked in the sidebar (in the order ticked: the first is the baseline),
 * the comparison open (its columns filled in as the engine answers: each plan simulated, each single setting
 * change measured against the first plan, each plan's largest batch searched), and the saved comparisons.
 *
 * Plans come from storage as the user saved them; each is parsed here with the engine's plan schema (defaults
 * applied), so the settings table and the attribution (engine/compare/) read the same values.
 */
import catalog from '../../../resources/gpus.json';
import {
  attributeDifference,
  attributionVariants,
  parseGpuCatalog,
  safeParsePlan,
  type Attribution,
  type MaxBatchResult,
  type Plan,
  type SettingKey,
  type SimulateResult,
  type Trial,
  type VariantOutcome,
} from '../../../engine/index.ts';
import type { ComparedPlan, ComparisonSummary, PlanRecord } from '../../../electron/common/ipc.ts';
import type { PlanIssue } from '../engine/protocol.ts';
import { api } from '../lib/api.ts';
import { CompareWorker, type FinalAnswer } from './compare-worker.ts';
import { settings } from './settings.svelte.ts';
import { toasts } from './toasts.svelte.ts';

export const MIN_COMPARED = 2;
export const MAX_COMPARED = 4;

const gpuCatalog = parseGpuCatalog(catalog);

export interface CompareColumn {
  planId: string;
  /** The plan's name as saved now (or its id, for a deleted one). */
  name: string;
  status: ComparedPlan['status'];
  record: PlanRecord | null;
  /** The plan parsed (defaults applied); null when it is gone or does not parse. */
  plan: Plan | null;
  issues: PlanIssue[];
  simulation: SimulateResult | null;
  /** The engine could not simulate it (a message), apart from the plan's own problems. */
  error: string | null;
  trials: Trial[];
  maxBatch: MaxBatchResult | null;
  /** Against the first column (null for the first, or while measuring). */
  attribution: Attribution | null;
}

export type ComparePhase = 'loading' | 'simulating' | 'attributing' | 'searching' | 'done';

function measureOf(r: SimulateResult) {
  return { peak_allocated_bytes: r.peak_allocated_bytes, peak_reserved_bytes: r.peak_reserved_bytes, fits: r.fits };
}

function answerMessage(answer: FinalAnswer): string {
  if (answer.kind === 'invalid_plan') return answer.issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join('; ');
  if (answer.kind === 'error') return answer.message;
  return answer.kind;
}

export class CompareState {
  /** Plan ids ticked in the sidebar, in the order ticked. */
  selected = $state<string[]>([]);
  /** The comparison on screen (null: the editor is). */
  columns = $state.raw<CompareColumn[] | null>(null);
  phase = $state<ComparePhase>('done');
  /** The saved comparison on screen, if it is one. */
  savedId = $state<string | null>(null);
  name = $state('');
  /** The name and plans as last saved (the Save button is enabled when they differ). */
  savedAs = $state<string | null>(null);
  saved = $state.raw<ComparisonSummary[]>([]);
  error = $state<string | null>(null);
  /** Why the main process refused the name (too long, say): shown beside the name, which is kept as typed. */
  nameError = $state<string | null>(null);
  #worker: CompareWorker | null = null;
  #generation = 0;

  get open(): boolean {
    return this.columns !== null;
  }

  /** Name and plan order as they would be saved. */
  get signature(): string {
    return JSON.stringify([this.name.trim(), this.columns?.map((c) => c.planId) ?? []]);
  }

  toggle(id: string): void {
    if (this.selected.includes(id)) this.selected = this.selected.filter((x) => x !== id);
    else if (this.selected.length < MAX_COMPARED) this.selected = [...this.selected, id];
    else toasts.show(settings.m.cmpPickLimit);
  }

  /** Unticks plans that are no longer saved. */
  keepSelected(ids: ReadonlySet<string>): void {
    if (this.selected.some((id) => !ids.has(id))) this.selected = this.selected.filter((id) => ids.has(id));
  }

  clearSelection(): void {
    this.selected = [];
  }

  async refreshSaved(): Promise<void> {
    const memplan = api();
    if (!memplan) return;
    try {
      this.saved = (await memplan.comparisons.list()).comparisons;
    } catch (error) {
      this.error = (error as Error).message;
    }
  }

  /** Compares the ticked plans (a new, unsaved comparison). */
  async compareSelected(): Promise<void> {
    const memplan = api();
    if (!memplan || this.selected.length < MIN_COMPARED) return;
    const ids = [...this.selected];
    const generation = this.#start();
    this.savedId = null;
    this.savedAs = null;
    const records = await Promise.all(ids.map((id) => memplan.plans.get({ id }).catch(() => null)));
    if (generation !== this.#generation) return;
    this.name = records.map((r) => r?.name ?? '?').join(' · ');
    const compared: ComparedPlan[] = ids.map((id, i) => ({ plan_id: id, compared_updated_at: records[i]?.updated_at ?? null, status: records[i] ? 'current' : 'deleted', plan: records[i] ?? null }));
    await this.#run(generation, compared);
  }

  /** Reopens a saved comparison as it was saved (its plans as they are now, each saying whether it changed). */
  async openSaved(id: string): Promise<void> {
    const memplan = api();
    if (!memplan) return;
    const generation = this.#start();
    try {
      const record = await memplan.comparisons.get({ id });
      if (generation !== this.#generation) return;
      if (!record) {
        this.close();
        await this.refreshSaved();
        return;
      }
      this.savedId = record.id;
      this.name = record.name;
      this.selected = [...record.plan_ids];
      await this.#run(generation, record.plans, record.name);
    } catch (error) {
      toasts.show((error as Error).message, { tone: 'error', ms: 6000 });
      this.close();
    }
  }

  async save(): Promise<void> {
    const memplan = api();
    const columns = this.columns;
    if (!memplan || !columns) return;
    const name = this.name.trim() || columns.map((c) => c.name).join(' · ');
    try {
      const saved = await memplan.comparisons.save({ ...(this.savedId ? { id: this.savedId } : {}), name, plan_ids: columns.map((c) => c.planId) });
      this.savedId = saved.id;
      this.name = saved.name;
      this.savedAs = this.signature;
      // Saved again: every plan is now compared at its current version.
      this.columns = columns.map((c) => (c.status === 'edited' ? { ...c, status: 'current' } : c));
      this.nameError = null;
      toasts.show(settings.m.cmpToastSaved(saved.name));
      await this.refreshSaved();
    } catch (error) {
      const message = (error as Error).message;
      // `comparisons.save: name: must be at most 200 characters`: beside the field, not in a toast.
      const name = /^comparisons\.save: name: (.*)$/.exec(message);
      if (name) this.nameError = name[1]!;
      else toasts.show(message, { tone: 'error', ms: 6000 });
    }
  }

  async remove(summary: ComparisonSummary): Promise<void> {
    const memplan = api();
    if (!memplan) return;
    try {
      const undoToken = await memplan.comparisons.delete({ id: summary.id });
      if (this.savedId === summary.id) {
        this.savedId = null;
        this.savedAs = null;
      }
      toasts.show(settings.m.cmpToastDeleted(summary.name), {
        action: {
          label: settings.m.undo,
          run: async () => {
            try {
              await memplan.comparisons.restore(undoToken);
              toasts.show(settings.m.cmpToastRestored(summary.name));
              await this.refreshSaved();
            } catch (error) {
              toasts.show((error as Error).message, { tone: 'error', ms: 6000 });
            }
          },
        },
      });
      await this.refreshSaved();
    } catch (error) {
      toasts.show((error as Error).message, { tone: 'error', ms: 6000 });
    }
  }

  /** Back to the editor; the engine stops. */
  close(): void {
    this.#generation++;
    this.#worker?.close();
    this.#worker = null;
    this.columns = null;
    this.phase = 'done';
  }

  #start(): number {
    this.#worker?.close();
    this.#worker = new CompareWorker();
    this.phase = 'loading';
    this.error = null;
    return ++this.#generation;
  }

  #update(generation: number, index: number, patch: Partial<CompareColumn>): void {
    if (generation !== this.#generation || !this.columns) return;
    this.columns = this.columns.map((c, i) => (i === index ? { ...c, ...patch } : c));
  }

  async #run(generation: number, compared: readonly ComparedPlan[], savedName?: string): Promise<void> {
    const worker = this.#worker!;
    this.columns = compared.map((c) => {
      const parsed = c.plan ? safeParsePlan(c.plan.plan, { catalog: gpuCatalog }) : null;
      return {
        planId: c.plan_id,
        name: c.plan?.name ?? c.plan_id,
        status: c.status,
        record: c.plan,
        plan: parsed?.ok ? parsed.plan : null,
        issues: parsed && !parsed.ok ? parsed.issues : [],
        simulation: null,
        error: null,
        trials: [],
        maxBatch: null,
        attribution: null,
      };
    });
    this.savedAs = savedName !== undefined ? this.signature : null;
    const live = () => generation === this.#generation;

    this.phase = 'simulating';
    for (const [i, column] of this.columns.entries()) {
      if (!column.record || !live()) continue;
      const answer = await worker.run({ kind: 'simulate', plan: column.record.plan });
      if (answer.kind === 'simulate_result') this.#update(generation, i, { simulation: answer.result });
      else if (answer.kind === 'invalid_plan') this.#update(generation, i, { issues: answer.issues });
      else if (answer.kind !== 'cancelled') this.#update(generation, i, { error: answerMessage(answer) });
    }

    this.phase = 'attributing';
    for (let i = 1; live() && this.columns && i < this.columns.length; i++) {
      const base = this.columns[0]!;
      const other = this.columns[i]!;
      if (!base.plan || !other.plan || !base.simulation || !other.simulation) continue;
      const outcomes = new Map<SettingKey, VariantOutcome>();
      for (const variant of attributionVariants(base.plan, other.plan)) {
        const answer = await worker.run({ kind: 'simulate', plan: variant.plan });
        if (!live()) return;
        outcomes.set(variant.key, answer.kind === 'simulate_result' ? measureOf(answer.result) : { error: answerMessage(answer) });
      }
      this.#update(generation, i, { attribution: attributeDifference(base.plan, other.plan, { base: measureOf(base.simulation), other: measureOf(other.simulation), outcomes }) });
    }

    this.phase = 'searching';
    for (let i = 0; live() && this.columns && i < this.columns.length; i++) {
      const column = this.columns[i]!;
      if (!column.record || !column.simulation) continue;
      const trials: Trial[] = [];
      const answer = await worker.run({ kind: 'max_batch', plan: column.record.plan }, (trial) => trials.push(trial));
      if (answer.kind === 'max_batch_result') this.#update(generation, i, { maxBatch: answer.result, trials: answer.result.trials });
      else if (answer.kind !== 'cancelled') this.#update(generation, i, { error: answerMessage(answer), trials });
    }
    if (live()) this.phase = 'done';
  }
}

export const compare = new CompareState();
