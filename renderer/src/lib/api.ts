/**
 * `window.memplan`: the preload's verbs, typed by the IPC contract (electron/common/ipc.ts). Absent when the page
 * runs outside the app (a plain browser): the shell then works without saved plans.
 */
import type { MemplanApi, PlanSummary, PlanRecord, MenuCommand } from '../../../electron/common/ipc.ts';

export type { MemplanApi, PlanRecord, MenuCommand };
export type SavedPlanSummary = PlanSummary;

declare global {
  interface Window {
    memplan?: MemplanApi;
  }
}

export function api(): MemplanApi | undefined {
  return typeof window === 'undefined' ? undefined : window.memplan;
}
