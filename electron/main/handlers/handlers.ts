/**
 * What each channel does, against a PlanStore and a Dialogs: the same functions answer Electron's ipcMain
 * (ipc.ts) and the e2e test bridge (test/e2e/support/bridge.ts). No Electron import: the dialogs are an interface,
 * implemented with Electron's native dialogs in electron/main/dialogs.ts and with a queue in the bridge.
 */
import type { AppInfo, ChannelResult, FileFilter, Handlers, LocaleChoice, MenuLocale } from '../../common/ipc.ts';
import type { ComparisonStore } from '../storage/comparison-store.ts';
import type { PlanStore } from '../storage/plan-store.ts';
import type { SnapshotStore } from '../storage/snapshot-store.ts';

export interface Dialogs {
  /** Shows an open dialog for a text file; null when the user cancels. */
  openText(purpose: 'plan' | 'hf_config'): Promise<ChannelResult<'files:openText'>>;
  /** Shows an open dialog for a binary file; null when the user cancels. */
  openBytes(purpose: 'snapshot'): Promise<ChannelResult<'files:openBytes'>>;
  /** Shows a save dialog and writes the text; null when the user cancels. */
  saveText(args: { suggested_name: string; text: string; filters: FileFilter[] }): Promise<ChannelResult<'files:saveText'>>;
  /** Shows a save dialog and writes the bytes (a chart's PNG); null when the user cancels. */
  saveBytes(args: { suggested_name: string; bytes: ArrayBuffer; filters: FileFilter[] }): Promise<ChannelResult<'files:saveBytes'>>;
  /** Shows a save dialog for a report's Markdown, writes it and its images beside it; null when the user cancels. */
  saveReport(args: { suggested_name: string; text: string; images: { name: string; bytes: ArrayBuffer }[] }): Promise<ChannelResult<'files:saveReport'>>;
}

export interface HandlerContext {
  plans: PlanStore;
  comparisons: ComparisonStore;
  snapshots: SnapshotStore;
  dialogs: Dialogs;
  info: () => AppInfo;
  /** Rebuilds the application menu in the interface's language (the test bridge records it). */
  setMenuLocale?: (locale: MenuLocale, choice: LocaleChoice) => void;
}

export function createHandlers({ plans, comparisons, snapshots, dialogs, info, setMenuLocale }: HandlerContext): Handlers {
  return {
    'plans:list': ({ query }) => plans.list(query),
    'plans:get': ({ id }) => plans.get(id),
    'plans:save': (args) => plans.save(args),
    'plans:rename': ({ id, name }) => plans.rename(id, name),
    'plans:duplicate': ({ id, name }) => plans.duplicate(id, name),
    'plans:delete': ({ id }) => plans.delete(id),
    'plans:restore': (token) => plans.restore(token),
    'files:openText': ({ purpose }) => dialogs.openText(purpose),
    'files:openBytes': ({ purpose }) => dialogs.openBytes(purpose),
    'files:saveText': (args) => dialogs.saveText(args),
    'files:saveBytes': (args) => dialogs.saveBytes(args),
    'files:saveReport': (args) => dialogs.saveReport(args),
    'comparisons:list': () => comparisons.list(),
    'comparisons:get': ({ id }) => comparisons.get(id),
    'comparisons:save': (args) => comparisons.save(args),
    'comparisons:delete': ({ id }) => comparisons.delete(id),
    'comparisons:restore': (token) => comparisons.restore(token),
    'snapshots:attach': (args) => snapshots.attach(args),
    'snapshots:list': ({ plan_id }) => snapshots.list(plan_id),
    'snapshots:get': ({ id }) => snapshots.get(id),
    'snapshots:detach': ({ id }) => snapshots.detach(id),
    'app:info': () => info(),
    'app:setLocale': ({ locale, choice }) => {
      setMenuLocale?.(locale, choice);
      return null;
    },
  };
}
