/**
 * Where the window was: its bounds and whether it was maximized, kept in `window-state.json` in the data folder
 * and restored at the next start, unless the screen it was on is gone (a window is never restored off-screen).
 * No Electron import: window.ts reads the displays' work areas and hands them in.
 */
import { z } from 'zod';
import { MIN_WINDOW_HEIGHT, MIN_WINDOW_WIDTH } from './security/window-options.ts';

export const WINDOW_STATE_FILE = 'window-state.json';

export interface Rect {
  x: number;
  y: number;
  width: number;
  height: number;
}

const windowStateSchema = z.object({
  x: z.number().int(),
  y: z.number().int(),
  width: z.number().int().min(MIN_WINDOW_WIDTH),
  height: z.number().int().min(MIN_WINDOW_HEIGHT),
  maximized: z.boolean(),
});

export type WindowState = z.output<typeof windowStateSchema>;

/** How much of the window's title bar must lie on a screen for its old place to be used. */
const MIN_VISIBLE_PX = 100;

/** The saved state, if it parses and its top edge is on one of the screens now attached; else null. */
export function restoreWindowState(text: string | null, workAreas: readonly Rect[]): WindowState | null {
  if (text === null) return null;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  const parsed = windowStateSchema.safeParse(value);
  if (!parsed.success) return null;
  const state = parsed.data;
  const titleBar = { x: state.x, y: state.y, width: state.width, height: 32 };
  const visible = workAreas.some((area) => {
    const overlapX = Math.min(titleBar.x + titleBar.width, area.x + area.width) - Math.max(titleBar.x, area.x);
    const overlapY = Math.min(titleBar.y + titleBar.height, area.y + area.height) - Math.max(titleBar.y, area.y);
    return overlapX >= MIN_VISIBLE_PX && overlapY > 0;
  });
  return visible ? state : null;
}

export function serializeWindowState(bounds: Rect, maximized: boolean): string {
  return JSON.stringify({ x: Math.round(bounds.x), y: Math.round(bounds.y), width: Math.round(bounds.width), height: Math.round(bounds.height), maximized });
}
