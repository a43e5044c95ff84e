import { describe, expect, it } from 'vitest';
import { byteTicks, formatByteTick, formatBytes, formatPercent } from '../../renderer/src/charts/units.ts';

describe('byte sizes in IEC units', () => {
  it('picks the unit a size reads best in, with two digits', () => {
    expect(formatBytes(512, 'en')).toBe('512\u00a0B');
    expect(formatBytes(1536, 'en')).toBe('1.50\u00a0KiB');
    expect(formatBytes(8_082_423_808, 'en')).toBe('7.53\u00a0GiB');
    expect(formatBytes(84_299_415_552, 'zh-CN')).toBe('78.51\u00a0GiB');
  });
  it('groups digits and signs differences', () => {
    expect(formatBytes(1024 ** 4 * 1500, 'en', { unit: 'GiB', digits: 0 })).toBe('1,536,000\u00a0GiB');
    expect(formatBytes(3 * 1024 ** 3, 'en', { signed: true })).toBe('+3.00\u00a0GiB');
    expect(formatBytes(-3 * 1024 ** 3, 'en', { signed: true })).toBe('-3.00\u00a0GiB');
  });
  it('formats percentages for the locale', () => {
    expect(formatPercent(0.0958, 'en')).toBe('9.6%');
    expect(formatPercent(0.05, 'zh-CN', { digits: 0 })).toBe('5%');
  });
});

describe('byte axis ticks', () => {
  it('steps by round amounts of one unit and labels them in it', () => {
    const ticks = byteTicks(0, 80 * 1024 ** 3, 5);
    expect(ticks.map((t) => t / 1024 ** 3)).toEqual([0, 20, 40, 60, 80]);
    expect(ticks.map((t) => formatByteTick(t, ticks, 'en'))).toEqual(['0\u00a0GiB', '20\u00a0GiB', '40\u00a0GiB', '60\u00a0GiB', '80\u00a0GiB']);
  });
  it('switches to MiB for a small range', () => {
    const ticks = byteTicks(0, 600 * 1024 ** 2, 6);
    expect(ticks.map((t) => t / 1024 ** 2)).toEqual([0, 100, 200, 300, 400, 500, 600]);
    expect(formatByteTick(ticks[3]!, ticks, 'en')).toBe('300\u00a0MiB');
  });
  it('never leaves the range without a tick', () => {
    for (const max of [1, 1000, 5e6, 3.3e9, 7.7e10, 1.9e11]) {
      const ticks = byteTicks(0, max);
      expect(ticks.length).toBeGreaterThanOrEqual(2);
      expect(ticks.at(-1)!).toBeLessThanOrEqual(max * (1 + 1e-9));
    }
  });
});
