/**
 * Opens plans.sqlite in the user's data folder (storage/: checked, backed up, migrated), and tells the user what
 * happened to it: a database moved aside as damaged gets a dialog naming where the old file is. A database this
 * memplan cannot open (written by a newer one, or unreadable) ends the app with a dialog rather than a crash.
 */
import { join } from 'node:path';
import { app, dialog, type BrowserWindow } from 'electron';
import type { StorageNotice } from '../common/ipc.ts';
import { DATABASE_FILE, openStorage, type Storage } from './storage/index.ts';

export function setupStorage(): Storage {
  const path = join(app.getPath('userData'), DATABASE_FILE);
  try {
    return openStorage(path);
  } catch (error) {
    dialog.showErrorBox('memplan cannot open its database', `${(error as Error).message}\n\nThe file is ${path}. It was not changed.`);
    app.exit(1);
    throw error;
  }
}

export function tellAboutStorage(window: BrowserWindow, notices: readonly StorageNotice[]): void {
  for (const notice of notices) {
    if (notice.id !== 'database_recovered') continue;
    void dialog.showMessageBox(window, {
      type: 'warning',
      title: 'Saved plans: a damaged database was set aside',
      message: 'memplan could not read its database of saved plans and started a new, empty one.',
      detail: `The old file was kept, not deleted:\n${notice.moved_to}\n\nWhat was wrong: ${notice.reason}`,
    });
  }
}
