/** The PNG header reader that checks every exported chart: a PNG built here by hand, then broken in each way it checks. */
import { zlibSync } from 'fflate';
import { describe, expect, it } from 'vitest';
import { readPngHeader } from '../../renderer/src/export/png-header.ts';

function crc32(bytes: Uint8Array): number {
  let c = ~0;
  for (const b of bytes) {
    c ^= b;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0xedb88320 : c >>> 1;
  }
  return ~c >>> 0;
}

function chunk(type: string, data: Uint8Array): Uint8Array {
  const out = new Uint8Array(12 + data.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, data.length);
  out.set(new TextEncoder().encode(type), 4);
  out.set(data, 8);
  view.setUint32(8 + data.length, crc32(out.subarray(4, 8 + data.length)));
  return out;
}

/** A solid RGBA image, as the PNG spec writes it. */
function png(width: number, height: number): Uint8Array {
  const ihdr = new Uint8Array(13);
  new DataView(ihdr.buffer).setUint32(0, width);
  new DataView(ihdr.buffer).setUint32(4, height);
  ihdr.set([8, 6, 0, 0, 0], 8);
  const rows = new Uint8Array(height * (1 + 4 * width)).fill(255);
  for (let y = 0; y < height; y++) rows[y * (1 + 4 * width)] = 0;
  const parts = [new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', ihdr), chunk('IDAT', zlibSync(rows)), chunk('IEND', new Uint8Array())];
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) out.set(p, at), (at += p.length);
  return out;
}

describe('readPngHeader', () => {
  it('reads the size and colour type of a PNG', () => {
    expect(readPngHeader(png(640, 300))).toEqual({ width: 640, height: 300, bitDepth: 8, colorType: 6 });
  });
  it('refuses what is not a PNG: a wrong signature, no IHDR first, a truncated header, an empty image', () => {
    const good = png(3, 2);
    const badSignature = good.slice();
    badSignature[1] = 0x51;
    const noIhdr = good.slice();
    noIhdr[12] = 0x69;
    expect(readPngHeader(badSignature)).toBeNull();
    expect(readPngHeader(noIhdr)).toBeNull();
    expect(readPngHeader(good.subarray(0, 20))).toBeNull();
    expect(readPngHeader(png(0, 2))).toBeNull();
    expect(readPngHeader(new TextEncoder().encode('<svg xmlns="http://www.w3.org/2000/svg"/>'))).toBeNull();
  });
});
