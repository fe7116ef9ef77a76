import { Limits } from '@sandstream/wire';
import { describe, expect, it } from 'vitest';
import { LineSplitter } from './line-splitter.js';

function split(chunks: (string | Buffer)[], max?: number): string[] {
  const lines: string[] = [];
  const splitter = new LineSplitter((l) => lines.push(l), max);
  for (const c of chunks) splitter.push(typeof c === 'string' ? Buffer.from(c) : c);
  splitter.end();
  return lines;
}

describe('LineSplitter', () => {
  it('splits on LF and CRLF and keeps a final line without newline', () => {
    expect(split(['a\r\nb\nc'])).toEqual(['a', 'b', 'c']);
    expect(split(['a\n', '\n'])).toEqual(['a', '']);
    expect(split(['x\r'])).toEqual(['x']);
  });

  it('joins lines that arrive in pieces, including a CR and LF in different chunks', () => {
    expect(split(['he', 'llo\r', '\nwor', 'ld\n'])).toEqual(['hello', 'world']);
  });

  it('keeps a lone CR inside a line (progress bars)', () => {
    expect(split(['10%\r20%\n'])).toEqual(['10%\r20%']);
  });

  it('cuts lines longer than the limit into pieces of at most the limit', () => {
    const max = Limits.eventLineMaxBytes;
    const lines = split([`${'x'.repeat(max * 2 + 5)}\nshort\n`]);
    expect(lines.map((l) => l.length)).toEqual([max, max, 5, 5]);
  });

  it('cuts a newline-less flood as it arrives instead of buffering it', () => {
    const lines: string[] = [];
    const splitter = new LineSplitter((l) => lines.push(l), 8);
    for (let i = 0; i < 100; i++) splitter.push(Buffer.from('abcdefg'));
    // 700 bytes pushed, no newline: all but at most 9 bytes are out already.
    expect(lines.join('').length).toBeGreaterThanOrEqual(700 - 9);
    expect(lines.every((l) => Buffer.byteLength(l) <= 8)).toBe(true);
    splitter.end();
    expect(lines.join('')).toBe('abcdefg'.repeat(100));
  });

  it('does not split a line of exactly the limit followed by CRLF', () => {
    expect(split(['12345678\r', '\nx'], 8)).toEqual(['12345678', 'x']);
  });

  it('never cuts inside a UTF-8 character', () => {
    const text = 'é'.repeat(10) + '€'.repeat(10); // 2-byte and 3-byte characters
    const lines = split([`${text}\n`], 7);
    expect(lines.join('')).toBe(text);
    for (const l of lines) {
      expect(Buffer.byteLength(l)).toBeLessThanOrEqual(7);
      expect(l).not.toContain('\ufffd');
    }
  });

  it('refuses a limit too small to make progress', () => {
    expect(() => new LineSplitter(() => {}, 2)).toThrow(/maxLineBytes/);
  });

  describe('with a gate', () => {
    /** A consumer that takes `room` pieces, then only counts. */
    function gated(chunks: string[], room: number, max?: number) {
      const kept: string[] = [];
      let dropped = 0;
      const splitter = new LineSplitter((l) => kept.push(l), max, {
        accepting: () => kept.length < room,
        dropped: () => {
          dropped += 1;
        },
      });
      for (const c of chunks) splitter.push(Buffer.from(c));
      splitter.end();
      return { kept, dropped };
    }

    it('counts the lines it does not decode, so kept + dropped equals what an open gate emits', () => {
      const input = ['a\nbb\r\nccc\n', 'dd', 'dd\neee\n', 'tail'];
      const all = split(input);
      const { kept, dropped } = gated(input, 2);
      expect(kept).toEqual(all.slice(0, 2));
      expect(kept.length + dropped).toBe(all.length);
    });

    it('counts each piece of an over-long line, cut the same way as when it is emitted', () => {
      const input = [`${'x'.repeat(20)}\n`, 'y'.repeat(30), '\n'];
      const all = split(input, 8);
      const { kept, dropped } = gated(input, 1, 8);
      expect(kept).toEqual(all.slice(0, 1));
      expect(kept.length + dropped).toBe(all.length);
    });

    it('goes back to emitting as soon as the gate opens again', () => {
      let open = true;
      const kept: string[] = [];
      let dropped = 0;
      const splitter = new LineSplitter((l) => kept.push(l), undefined, {
        accepting: () => open,
        dropped: () => {
          dropped += 1;
        },
      });
      splitter.push(Buffer.from('1\n2\n'));
      open = false;
      splitter.push(Buffer.from('3\n4\n'));
      open = true;
      splitter.push(Buffer.from('5\n'));
      expect(kept).toEqual(['1', '2', '5']);
      expect(dropped).toBe(2);
    });
  });

  describe('with a gate that holds (back-pressure)', () => {
    /** A splitter whose gate lets `budget` lines through, then holds until given more. */
    function holding(max?: number) {
      const kept: string[] = [];
      let budget = 0;
      let dropped = 0;
      const splitter = new LineSplitter((l) => kept.push(l), max, {
        accepting: () => kept.length < budget,
        dropped: () => {
          dropped += 1;
        },
        holding: () => true,
      });
      return {
        splitter,
        kept,
        allow(n: number) {
          budget = n;
        },
        dropped: () => dropped,
      };
    }

    it('stops at the line the gate holds and resumes there, losing and repeating nothing', () => {
      const input = ['1\n2\n3', '\n4\r\n5\n', `${'x'.repeat(20)}\n`, 'y'.repeat(30), '\n6'];
      const all = split(input, 8);
      const h = holding(8);
      const results: boolean[] = [];
      for (const chunk of input) results.push(h.splitter.push(Buffer.from(chunk)));
      // Nothing allowed yet: the first chunk is held, the rest queue behind it.
      expect(results).toEqual([false, false, false, false, false]);
      expect(h.splitter.holding).toBe(true);
      expect(h.kept).toEqual([]);
      // Let the lines through a few at a time, as room comes.
      for (let n = 1; !h.splitter.resume(); n += 3) {
        h.allow(n);
        expect(h.kept.length).toBeLessThanOrEqual(n);
      }
      h.splitter.end();
      expect(h.kept).toEqual(all);
      expect(h.dropped()).toBe(0);
      expect(h.splitter.heldBytes).toBe(0);
    });

    it('holds in the middle of an over-long line without a newline, and cuts it the same way', () => {
      const input = ['z'.repeat(50)];
      const all = split(input, 8);
      const h = holding(8);
      h.allow(2);
      expect(h.splitter.push(Buffer.from(input[0] as string))).toBe(false);
      expect(h.kept).toEqual(all.slice(0, 2));
      h.allow(100);
      expect(h.splitter.resume()).toBe(true);
      h.splitter.end();
      expect(h.kept).toEqual(all);
    });

    it('counts what it holds as dropped when told to give up, piece by piece', () => {
      const h = holding(8);
      h.allow(1);
      h.splitter.push(Buffer.from('a\nb\n'));
      h.splitter.push(Buffer.from(`${'c'.repeat(20)}\nd`));
      h.splitter.dropHeld();
      // b, three pieces of the c line, and the unterminated d.
      expect(h.kept).toEqual(['a']);
      expect(h.dropped()).toBe(5);
      expect(h.splitter.holding).toBe(false);
    });

    it('drops instead of holding while the gate says it is not holding (Redis unreachable)', () => {
      const kept: string[] = [];
      let dropped = 0;
      const splitter = new LineSplitter((l) => kept.push(l), undefined, {
        accepting: () => false,
        dropped: () => {
          dropped += 1;
        },
        holding: () => false,
      });
      expect(splitter.push(Buffer.from('1\n2\n'))).toBe(true);
      expect(kept).toEqual([]);
      expect(dropped).toBe(2);
    });
  });
});
