/**
 * A chart as a PNG file: the Chart.js canvas drawn over a background of the theme's surface colour (a chart canvas
 * is transparent, and in the dark theme its text and grid are light: without the background the image is
 * unreadable in a light viewer, and with the wrong one unreadable in the app's). Pixels as the canvas holds them
 * (devicePixelRatio included), optionally with a margin.
 */
import { readPalette } from '../charts/theme.svelte.ts';
import { readPngHeader } from './png-header.ts';

export interface PngOptions {
  /** A CSS colour; default: the theme's surface colour as seen from the canvas (what the chart is drawn against). */
  background?: string;
  /** CSS pixels of background around the chart (scaled by the canvas's pixel ratio); default 12. */
  margin?: number;
}

/** The canvas as PNG bytes, over an opaque background. */
export async function canvasToPng(canvas: HTMLCanvasElement, options: PngOptions = {}): Promise<Uint8Array> {
  if (canvas.width === 0 || canvas.height === 0) throw new Error('the chart has no size (is it on screen?)');
  const ratio = canvas.clientWidth > 0 ? canvas.width / canvas.clientWidth : 1;
  const margin = Math.round((options.margin ?? 12) * ratio);
  const background = options.background ?? readPalette(canvas).surface;
  const out = document.createElement('canvas');
  out.width = canvas.width + 2 * margin;
  out.height = canvas.height + 2 * margin;
  const context = out.getContext('2d');
  if (!context) throw new Error('no 2D canvas context');
  context.fillStyle = background;
  context.fillRect(0, 0, out.width, out.height);
  context.drawImage(canvas, margin, margin);
  const blob = await new Promise<Blob | null>((resolve) => out.toBlob(resolve, 'image/png'));
  if (!blob) throw new Error('the chart could not be encoded as PNG');
  const bytes = new Uint8Array(await blob.arrayBuffer());
  if (!readPngHeader(bytes)) throw new Error('the chart could not be encoded as PNG');
  return bytes;
}

/** The first chart canvas inside `root` (a result card, a view) as PNG bytes, or null when there is none. */
export async function chartPngIn(root: ParentNode, options: PngOptions = {}): Promise<Uint8Array | null> {
  const canvas = root.querySelector('canvas');
  return canvas ? canvasToPng(canvas, options) : null;
}
