/** The native open and save dialogs behind files.openText / openBytes / saveText (handlers/handlers.ts `Dialogs`). */
import { readFile, stat, writeFile } from 'node:fs/promises';
import { basename } from 'node:path';
import { BrowserWindow, dialog, type FileFilter, type OpenDialogOptions } from 'electron';
import { MAX_SNAPSHOT_BYTES, MAX_TEXT_FILE_BYTES } from '../common/ipc.ts';
import type { Dialogs } from './handlers/handlers.ts';

const OPEN: Record<'plan' | 'hf_config' | 'snapshot', { title: string; filters: FileFilter[] }> = {
  plan: { title: 'Open a plan file', filters: [{ name: 'memplan plan', extensions: ['json'] }, { name: 'All files', extensions: ['*'] }] },
  hf_config: { title: 'Import a Hugging Face config.json', filters: [{ name: 'config.json', extensions: ['json'] }, { name: 'All files', extensions: ['*'] }] },
  snapshot: {
    title: 'Open a PyTorch memory snapshot',
    filters: [{ name: 'Memory snapshot', extensions: ['pickle', 'pkl', 'gz'] }, { name: 'All files', extensions: ['*'] }],
  },
};

async function chooseFile(purpose: keyof typeof OPEN, maxBytes: number): Promise<string | null> {
  const window = BrowserWindow.getFocusedWindow();
  const options: OpenDialogOptions = { title: OPEN[purpose].title, filters: OPEN[purpose].filters, properties: ['openFile'] };
  const choice = window ? await dialog.showOpenDialog(window, options) : await dialog.showOpenDialog(options);
  const path = choice.canceled ? undefined : choice.filePaths[0];
  if (!path) return null;
  const size = (await stat(path)).size;
  if (size > maxBytes) throw new Error(`${basename(path)} is ${size} bytes; at most ${maxBytes} can be opened`);
  return path;
}

export const electronDialogs: Dialogs = {
  async openText(purpose) {
    const path = await chooseFile(purpose, MAX_TEXT_FILE_BYTES);
    return path === null ? null : { name: basename(path), text: await readFile(path, 'utf8') };
  },
  async openBytes(purpose) {
    const path = await chooseFile(purpose, MAX_SNAPSHOT_BYTES);
    if (path === null) return null;
    const bytes = await readFile(path);
    return { name: basename(path), bytes: bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer };
  },
  async saveText({ suggested_name, text, filters }) {
    const window = BrowserWindow.getFocusedWindow();
    const options = { defaultPath: suggested_name, filters: filters.length > 0 ? filters : [{ name: 'All files', extensions: ['*'] }] };
    const choice = window ? await dialog.showSaveDialog(window, options) : await dialog.showSaveDialog(options);
    if (choice.canceled || !choice.filePath) return null;
    await writeFile(choice.filePath, text, 'utf8');
    return { name: basename(choice.filePath) };
  },
};
