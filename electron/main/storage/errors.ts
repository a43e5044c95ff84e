/**
 * When the disk says no: a full disk, a read-only file or folder, a file that cannot be opened or written. SQLite
 * refuses the statement and rolls its transaction back, so nothing saved before is touched (the durability and
 * read-only tests check it); what is left is to tell the user in words what happened and what to do, instead of
 * SQLite's "attempt to write a readonly database". The handlers pass the message on (`plans.save: ...`); the
 * renderer shows it and keeps the plan in the editor, unsaved.
 */

/** A write or an open the file system refused; `code` is SQLite's or Node's (`SQLITE_FULL`, `EACCES`, ...). */
export class StorageError extends Error {
  readonly code: string;
  readonly path: string;
  constructor(message: string, code: string, path: string) {
    super(message);
    this.name = 'StorageError';
    this.code = code;
    this.path = path;
  }
}

function codeOf(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : '';
}

/** What the user is told, by the kind of refusal; null when the error is not the file system's. */
function describe(code: string, path: string, doing: string): string | null {
  if (code === 'SQLITE_FULL' || code === 'ENOSPC')
    return `${doing}: the disk holding ${path} is full. Free some space and try again; nothing saved before was lost.`;
  if (code.startsWith('SQLITE_READONLY') || code === 'EROFS' || code === 'EACCES' || code === 'EPERM')
    return `${doing}: ${path} or its folder is read-only (memplan may not write there). Make it writable and try again; nothing saved before was changed.`;
  if (code.startsWith('SQLITE_CANTOPEN'))
    return `${doing}: ${path} cannot be opened for writing (its folder may be read-only or missing, or it is not a file). Nothing saved before was changed.`;
  if (code.startsWith('SQLITE_IOERR') || code === 'EIO')
    return `${doing}: the disk failed to read or write ${path} (${code}). Nothing saved before was changed; check the disk and try again.`;
  return null;
}

/** `error` as a StorageError when the file system refused (full, read-only, cannot open, I/O), else unchanged. */
export function storageFailure(error: unknown, path: string, doing: string): unknown {
  if (error instanceof StorageError) return error;
  const code = codeOf(error);
  const message = describe(code, path, doing);
  return message === null ? error : new StorageError(message, code, path);
}
