import { describe, expect, it } from 'vitest';
import { restoreWindowState, serializeWindowState } from '../../electron/main/window-state.ts';

const LAPTOP = { x: 0, y: 0, width: 1920, height: 1080 };
const RIGHT_MONITOR = { x: 1920, y: 0, width: 2560, height: 1440 };

describe('the window comes back where it was', () => {
  it('round-trips bounds and maximized', () => {
    const text = serializeWindowState({ x: 100.4, y: 80, width: 1400, height: 900 }, true);
    expect(restoreWindowState(text, [LAPTOP])).toEqual({ x: 100, y: 80, width: 1400, height: 900, maximized: true });
  });

  it('on a second monitor while it is attached, not once it is gone', () => {
    const text = serializeWindowState({ x: 2200, y: 100, width: 1400, height: 900 }, false);
    expect(restoreWindowState(text, [LAPTOP, RIGHT_MONITOR])).toMatchObject({ x: 2200 });
    expect(restoreWindowState(text, [LAPTOP])).toBeNull();
  });

  it('ignores a missing, damaged or too small saved state', () => {
    expect(restoreWindowState(null, [LAPTOP])).toBeNull();
    expect(restoreWindowState('{"x":', [LAPTOP])).toBeNull();
    expect(restoreWindowState(serializeWindowState({ x: 0, y: 0, width: 200, height: 100 }, false), [LAPTOP])).toBeNull();
    expect(restoreWindowState('{"x":0,"y":0,"width":1400,"height":900}', [LAPTOP])).toBeNull();
  });

  it('needs the title bar on a screen (a window pushed above the top edge is not restored there)', () => {
    expect(restoreWindowState(serializeWindowState({ x: 100, y: -500, width: 1400, height: 900 }, false), [LAPTOP])).toBeNull();
    expect(restoreWindowState(serializeWindowState({ x: 1850, y: 10, width: 1400, height: 900 }, false), [LAPTOP])).toBeNull();
  });
});
