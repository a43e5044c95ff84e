/** The native open and save dialogs behind files.openText / openBytes / saveText / saveBytes / saveReport (handlers/handlers.ts `Dialogs`). */
import { readFile, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { BrowserWindow, dialog, type FileFilter, type OpenDialogOptions, type SaveDialogOptions } from 'electron';
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

/** The path the user chose in a save dialog, or null when cancelled. */
async function chooseSavePath(suggestedName: string, filters: FileFilter[]): Promise<string | null> {
  const window = BrowserWindow.getFocusedWindow();
  const options: SaveDialogOptions = { defaultPath: suggestedName, filters: filters.length > 0 ? filters : [{ name: 'All files', extensions: ['*'] }] };
  const choice = window ? await dialog.showSaveDialog(window, options) : await dialog.showSaveDialog(options);
  return choice.canceled || !choice.filePath ? null : choice.filePath;
}

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
  async saveBytes({ suggested_name, bytes, filters }) {
    const path = await chooseSavePath(suggested_name, filters);
    if (path === null) return null;
    await writeFile(path, new Uint8Array(bytes));
    return { name: basename(path) };
  },
  async saveReport({ suggested_name, text, images }) {
    const path = await chooseSavePath(suggested_name, [{ name: 'Markdown', extensions: ['md'] }]);
    if (path === null) return null;
    // The images go beside the report under the names its links use (the contract checked they are plain names).
    const folder = dirname(path);
    const clash = images.find((image) => join(folder, image.name) === path);
    if (clash) throw new Error(`${clash.name} is the report's own name; choose another name for the report`);
    for (const image of images) await writeFile(join(folder, image.name), new Uint8Array(image.bytes));
    await writeFile(path, text, 'utf8');
    return { name: basename(path), images: images.map((image) => image.name) };
  },
};
