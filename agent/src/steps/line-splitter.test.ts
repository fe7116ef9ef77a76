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
});
