/**
 * What a PNG file says about itself: its signature and its IHDR chunk (width, height, bit depth, colour type).
 * Pure (no DOM), for the exports' checks and the tests; the pixels are the browser's business.
 * PNG (ISO/IEC 15948): an 8-byte signature, then chunks `length (4, big-endian) | type (4) | data | CRC (4)`;
 * the first chunk is IHDR with 13 bytes of data: width (4), height (4), bit depth, colour type, compression,
 * filter, interlace.
 */

export const PNG_SIGNATURE: readonly number[] = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

export interface PngHeader {
  width: number;
  height: number;
  bitDepth: number;
  /** 2: RGB, 6: RGBA, ... */
  colorType: number;
}

/** The header of a PNG, or null when `bytes` is not one (wrong signature, no IHDR first, a truncated header). */
export function readPngHeader(bytes: Uint8Array): PngHeader | null {
  if (bytes.length < 8 + 8 + 13 + 4) return null;
  if (PNG_SIGNATURE.some((b, i) => bytes[i] !== b)) return null;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const length = view.getUint32(8);
  const type = String.fromCharCode(bytes[12]!, bytes[13]!, bytes[14]!, bytes[15]!);
  if (type !== 'IHDR' || length !== 13) return null;
  const width = view.getUint32(16);
  const height = view.getUint32(20);
  if (width === 0 || height === 0) return null;
  return { width, height, bitDepth: bytes[24]!, colorType: bytes[25]! };
}
