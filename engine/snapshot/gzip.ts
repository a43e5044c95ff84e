// Transparent gunzip for snapshot files: `snapshot.pickle.gz` and `snapshot.pickle` are read alike.
// fflate is pure JavaScript, so this works in browsers, Web Workers and Node.

import { Gunzip, gunzipSync } from 'fflate';
import { InputError } from '../errors.ts';

/** True when the bytes start with the gzip magic number 1f 8b. */
export function isGzip(bytes: Uint8Array): boolean {
  return bytes.length >= 2 && bytes[0] === 0x1f && bytes[1] === 0x8b;
}

// Deflate cannot expand data by more than about 1032:1; a trailer claiming more is garbage (a truncated file).
const MAX_RATIO = 1040;

/**
 * Decompresses gzip input (one gzip member, as Python's gzip module and `gzip` write); returns any other input
 * unchanged (the same array, not a copy). The result is checked against the size and CRC-32 in the gzip trailer.
 * Throws an InputError whose message starts with "not a valid gzip file: " when the input is corrupt or truncated.
 */
export function maybeGunzip(bytes: Uint8Array): Uint8Array {
  if (!isGzip(bytes)) return bytes;
  const n = bytes.length;
  if (n < 18) throw bad(`it is only ${n} bytes long, shorter than any gzip file (the file is truncated)`);
  const crc = u32le(bytes, n - 8);
  const isize = u32le(bytes, n - 4);
  // fflate allocates the output from the trailer's size: refuse a size that a truncated file made up.
  if (isize > n * MAX_RATIO + 65536) {
    throw bad(`its trailer claims ${isize} uncompressed bytes from ${n} compressed bytes (the file is truncated or corrupt)`);
  }
  let out: Uint8Array;
  try {
    out = gunzipSync(bytes);
  } catch (e) {
    throw bad(`${e instanceof Error ? e.message : String(e)} (the file is truncated or corrupt)`);
  }
  if (out.length !== isize || crc32(out) !== crc) {
    throw bad(
      'the decompressed data does not match the size and CRC-32 in the gzip trailer ' +
        '(the file is corrupt, or it holds several concatenated gzip members, which memplan does not read)',
    );
  }
  return out;
}

/** Compressed bytes pushed to the stream between two yields of `maybeGunzipSteps` (tens of milliseconds of work). */
export const GUNZIP_BYTES_PER_STEP = 1 << 20;

/**
 * `maybeGunzip` in steps, for a caller that must stay responsive (the app's worker: progress bar, cancel): yields
 * the fraction of the compressed input read so far, returns the decompressed bytes (or the input itself when it is
 * not gzip). The output is allocated once from the trailer's size (checked as maybeGunzip checks it, and against
 * `maxBytes`), so a 100 MB snapshot is never held twice. The same errors as maybeGunzip.
 */
export function* maybeGunzipSteps(bytes: Uint8Array, maxBytes = Number.MAX_SAFE_INTEGER): Generator<number, Uint8Array, void> {
  if (!isGzip(bytes)) return bytes;
  const n = bytes.length;
  if (n < 18) throw bad(`it is only ${n} bytes long, shorter than any gzip file (the file is truncated)`);
  const crc = u32le(bytes, n - 8);
  const isize = u32le(bytes, n - 4);
  if (isize > n * MAX_RATIO + 65536) {
    throw bad(`its trailer claims ${isize} uncompressed bytes from ${n} compressed bytes (the file is truncated or corrupt)`);
  }
  if (isize > maxBytes) throw new InputError('', `the snapshot is ${isize} bytes uncompressed; memplan reads at most ${maxBytes}`);
  const out = new Uint8Array(isize);
  let filled = 0;
  let overflow = false;
  const stream = new Gunzip((chunk) => {
    if (filled + chunk.length > isize) overflow = true;
    else out.set(chunk, filled);
    filled += chunk.length;
  });
  for (let at = 0; at < n && !overflow; at += GUNZIP_BYTES_PER_STEP) {
    const end = Math.min(n, at + GUNZIP_BYTES_PER_STEP);
    try {
      stream.push(bytes.subarray(at, end), end === n);
    } catch (e) {
      throw bad(`${e instanceof Error ? e.message : String(e)} (the file is truncated or corrupt)`);
    }
    if (end < n) yield end / n;
  }
  if (overflow || filled !== isize || crc32(out) !== crc) {
    throw bad(
      'the decompressed data does not match the size and CRC-32 in the gzip trailer ' +
        '(the file is corrupt, or it holds several concatenated gzip members, which memplan does not read)',
    );
  }
  return out;
}

function bad(why: string): InputError {
  return new InputError('', `not a valid gzip file: ${why}`);
}

function u32le(b: Uint8Array, p: number): number {
  return (b[p]! | (b[p + 1]! << 8) | (b[p + 2]! << 16) | (b[p + 3]! << 24)) >>> 0;
}

// CRC-32 (IEEE 802.3, as gzip uses), slicing by 4.
let crcTables: Int32Array | null = null;

function getCrcTables(): Int32Array {
  if (crcTables !== null) return crcTables;
  const t = new Int32Array(4 * 256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[i] = c;
  }
  for (let i = 0; i < 256; i++) {
    let c = t[i]!;
    for (let k = 1; k < 4; k++) {
      c = t[c & 0xff]! ^ (c >>> 8);
      t[k * 256 + i] = c;
    }
  }
  crcTables = t;
  return t;
}

export function crc32(b: Uint8Array): number {
  const t = getCrcTables();
  let c = -1;
  const n = b.length;
  const n4 = n - (n & 3);
  let i = 0;
  for (; i < n4; i += 4) {
    c ^= b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16) | (b[i + 3]! << 24);
    c = t[768 + (c & 0xff)]! ^ t[512 + ((c >>> 8) & 0xff)]! ^ t[256 + ((c >>> 16) & 0xff)]! ^ t[c >>> 24]!;
  }
  for (; i < n; i++) c = t[(c ^ b[i]!) & 0xff]! ^ (c >>> 8);
  return ~c >>> 0;
}
