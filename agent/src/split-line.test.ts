import { describe, expect, it } from 'vitest';
import { splitLine } from './split-line.js';

describe('splitLine', () => {
  it('leaves ordinary lines alone', () => {
    expect(splitLine('hello', 16)).toEqual(['hello']);
  });

  it('cuts a long line into pieces that each fit, losing nothing', () => {
    const line = 'x'.repeat(100);
    const pieces = splitLine(line, 30);
    expect(pieces.length).toBeGreaterThan(1);
    expect(pieces.join('')).toBe(line);
    for (const piece of pieces) expect(Buffer.byteLength(piece)).toBeLessThanOrEqual(30);
  });

  it('never separates the halves of a surrogate pair', () => {
    const line = '😀'.repeat(40);
    const pieces = splitLine(line, 13);
    expect(pieces.join('')).toBe(line);
    for (const piece of pieces) {
      expect(piece).not.toMatch(/[\ud800-\udbff]$/);
      expect(Buffer.byteLength(piece)).toBeLessThanOrEqual(13);
    }
  });
});
