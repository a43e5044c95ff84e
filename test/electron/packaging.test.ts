/**
 * Packaging (build/electron-builder.yml), checked without network: electron-builder packs the built app (out/)
 * into a Linux directory build around a stand-in Electron binary (a file holding the fuse sentinel, so the fuses
 * can be flipped), and the test reads app.asar back: only out/, package.json and better-sqlite3's loader and this
 * OS's prebuilds, the .node files unpacked, no zod/fflate (bundled into out/main), no SQLite sources.
 * Skipped, saying so, when out/ has not been built (`npx electron-vite build`).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from './helpers.ts';

const ROOT = join(import.meta.dirname, '../..');
const BUILT = existsSync(join(ROOT, 'out/main/index.js')) && existsSync(join(ROOT, 'out/preload/preload.cjs')) && existsSync(join(ROOT, 'out/renderer/index.html'));
/** @electron/fuses looks for this, then a version byte, a length byte and one byte per fuse. */
const FUSE_SENTINEL = 'dL7pKGdnNz796PbbjQWNKmHXBZaB9tsX';

interface AsarEntry {
  files?: Record<string, AsarEntry>;
  unpacked?: boolean;
}

/** The entries of an asar archive: its header is a JSON tree of `files` after two Chromium pickles' lengths. */
function asarEntries(path: string): { path: string; unpacked: boolean }[] {
  const archive = readFileSync(path);
  const header = JSON.parse(archive.subarray(16, 16 + archive.readUInt32LE(12)).toString('utf8')) as AsarEntry;
  const walk = (entry: AsarEntry, prefix: string): { path: string; unpacked: boolean }[] =>
    Object.entries(entry.files ?? {}).flatMap(([name, child]) => [{ path: `${prefix}/${name}`, unpacked: child.unpacked === true }, ...walk(child, `${prefix}/${name}`)]);
  return walk(header, '');
}

describe('the icon', () => {
  it('is a 512x512 PNG with transparency, drawn from build/icon.svg', () => {
    const png = readFileSync(join(ROOT, 'build/icon.png'));
    expect(png.subarray(1, 4).toString('latin1')).toBe('PNG');
    expect(png.subarray(12, 16).toString('latin1')).toBe('IHDR');
    expect([png.readUInt32BE(16), png.readUInt32BE(20)]).toEqual([512, 512]);
    expect(png[25]).toBe(6); // colour type RGBA
    expect(readFileSync(join(ROOT, 'build/icon.svg'), 'utf8')).toMatch(/^<svg [^>]*viewBox="0 0 512 512"/);
  });
});

describe.skipIf(!BUILT)('the built preload', () => {
  if (!BUILT) it.skip('needs the built app in out/ (npx electron-vite build)', () => {});

  it('is one small CommonJS file: Electron and the channel names, no zod, no ipcRenderer handed to the page', () => {
    const preload = readFileSync(join(ROOT, 'out/preload/preload.cjs'), 'utf8');
    expect(preload.length).toBeLessThan(2048);
    expect([...preload.matchAll(/require\(["']([^"']+)["']\)/g)].map((m) => m[1])).toEqual(['electron']);
    expect(preload).not.toMatch(/\bzod\b|ZodType/);
    expect(preload).not.toMatch(/^\s*(import|export)\s/m);
    expect(preload).toMatch(/exposeInMainWorld\(["'`]memplan["'`],/);
    expect(preload).toMatch(/["'`]plans:save["'`]/);
  });
});

describe.skipIf(!BUILT)('the packaged app', () => {
  if (!BUILT) it.skip('needs the built app in out/ (npx electron-vite build)', () => {});

  it('holds the build, better-sqlite3 unpacked, and nothing else', () => {
    const dir = tempDir();
    const electronDist = join(dir, 'electron-dist');
    mkdirSync(electronDist);
    writeFileSync(join(electronDist, 'electron'), Buffer.concat([Buffer.from('#!/bin/sh\n# stand-in '), Buffer.from(FUSE_SENTINEL), Buffer.from([1, 9]), Buffer.from('101000010\n')]), { mode: 0o755 });
    writeFileSync(join(electronDist, 'version'), '45.4.1');
    writeFileSync(join(electronDist, 'LICENSE'), '');
    const output = join(dir, 'release');
    const run = spawnSync(
      process.execPath,
      [join(ROOT, 'node_modules/electron-builder/cli.js'), '--config', 'build/electron-builder.yml', '--linux', 'dir', '--x64', `-c.electronDist=${electronDist}`, '-c.electronVersion=45.4.1', `-c.directories.output=${output}`],
      { cwd: ROOT, encoding: 'utf8', env: { ...process.env, CI: '1' } },
    );
    expect(run.status, run.stdout + run.stderr).toBe(0);

    const resources = join(output, 'linux-unpacked/resources');
    const entries = asarEntries(join(resources, 'app.asar'));
    const files = entries.map((e) => e.path);
    const top = [...new Set(files.map((f) => f.split('/')[1]))].sort();
    expect(top).toEqual(['node_modules', 'out', 'package.json']);
    expect(files).toEqual(expect.arrayContaining(['/out/main/index.js', '/out/preload/preload.cjs', '/out/renderer/index.html', '/node_modules/better-sqlite3/lib/index.js']));
    const modules = [...new Set(files.filter((f) => f.startsWith('/node_modules/')).map((f) => f.split('/')[2]))];
    expect(modules).toEqual(['better-sqlite3']);
    expect(files.filter((f) => /better-sqlite3\/(deps|src)\/|binding\.gyp|\.map$/.test(f))).toEqual([]);
    const nativeModules = entries.filter((e) => e.path.endsWith('.node'));
    expect(nativeModules.map((e) => e.path)).toEqual(['/node_modules/better-sqlite3/prebuilds/linux-arm64.node', '/node_modules/better-sqlite3/prebuilds/linux-x64.node']);
    expect(nativeModules.every((e) => e.unpacked)).toBe(true);
    const prebuilds = readdirSync(join(resources, 'app.asar.unpacked/node_modules/better-sqlite3/prebuilds')).sort();
    expect(prebuilds).toEqual(['linux-arm64.node', 'linux-x64.node']);
  }, 180_000);
});
