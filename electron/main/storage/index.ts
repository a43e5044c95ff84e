/**
 * Storage as the main process and the test bridge open it: the database (database.ts: check, back up, recover,
 * migrate), the plan and comparison stores on it, deleted plans past their undo period purged, and what to tell the user.
 */
import type { StorageNotice } from '../../common/ipc.ts';
import { openDatabase, type OpenOptions } from './database.ts';
import { storageFailure } from './errors.ts';
import { ComparisonStore } from './comparison-store.ts';
import { PlanStore, type PlanStoreOptions } from './plan-store.ts';
import { SnapshotStore } from './snapshot-store.ts';

export const DATABASE_FILE = 'plans.sqlite';

export interface Storage {
  plans: PlanStore;
  comparisons: ComparisonStore;
  snapshots: SnapshotStore;
  path: string;
  notices: StorageNotice[];
  close(): void;
}

/** Opens the stores; a file system that refuses (a read-only folder or file, a full disk) throws a StorageError in words. */
export function openStorage(path: string, options: OpenOptions & PlanStoreOptions = {}): Storage {
  try {
    return openStores(path, options);
  } catch (error) {
    throw storageFailure(error, path, 'memplan cannot open its database of saved plans');
  }
}

function openStores(path: string, options: OpenOptions & PlanStoreOptions): Storage {
  const opened = openDatabase(path, options);
  const plans = new PlanStore(opened.db, options);
  const comparisons = new ComparisonStore(opened.db, plans, options);
  try {
    // deleted plans and comparisons past their undo period
    const now = (options.now ?? (() => new Date()))();
    plans.purgeDeleted(now);
    comparisons.purgeDeleted(now);
  } catch (error) {
    opened.db.close();
    throw error;
  }
  const snapshots = new SnapshotStore(opened.db, options);
  const damaged = plans.list().problems.length + comparisons.list().problems.length;
  const notices: StorageNotice[] = [...opened.notices, ...(damaged > 0 ? [{ id: 'rows_damaged' as const, count: damaged }] : [])];
  return {
    plans,
    comparisons,
    snapshots,
    path,
    notices,
    close: () => {
      if (opened.db.open) opened.db.close();
    },
  };
}

export { DatabaseTooNewError } from './database.ts';
export { StorageError } from './errors.ts';
export { PlanNotFoundError } from './plan-store.ts';
export { ComparisonNotFoundError } from './comparison-store.ts';
export { SnapshotNotFoundError } from './snapshot-store.ts';
