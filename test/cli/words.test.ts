/**
 * cli/words.ts: joinLines (a command's answer printed first and the rest later read as the whole text would) and
 * groupDigits (numbers written as toLocaleString('en-US') writes them).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { groupDigits, joinLines } from '../../cli/words.ts';

describe('joinLines', () => {
  it('no two blank lines in a row; a leading blank line dropped after a blank (or at the start, previous "")', () => {
    expect(joinLines(['a', '', '', 'b', ''], '')).toBe('a\n\nb\n\n');
    expect(joinLines(['', 'a'], '')).toBe('a\n');
    expect(joinLines(['', 'a'], undefined)).toBe('\na\n');
    expect(joinLines(['', ''], '')).toBe('');
  });

  it('two parts, the second after the first, give the text of the whole', () => {
    let runs = 0;
    const line = fc.constantFrom('', '', 'x', 'y z');
    fc.assert(
      fc.property(fc.array(line, { maxLength: 12 }), fc.array(line, { maxLength: 12 }), fc.constantFrom('', undefined), (head, rest, start) => {
        runs++;
        expect(joinLines(head, start) + joinLines(rest, head.length ? head.at(-1) : start)).toBe(joinLines([...head, ...rest], start));
      }),
      { numRuns: 500 },
    );
    console.log(`joinLines: ${runs} splits`);
  });
});

describe('groupDigits', () => {
  it("writes whole numbers as toLocaleString('en-US') does", () => {
    expect(groupDigits(0)).toBe('0');
    expect(groupDigits(999)).toBe('999');
    expect(groupDigits(1000)).toBe('1,000');
    expect(groupDigits(1_557_611_200)).toBe('1,557,611,200');
    fc.assert(
      fc.property(fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), (n) => {
        expect(groupDigits(n)).toBe(n.toLocaleString('en-US'));
      }),
      { numRuns: 500 },
    );
  });
});
