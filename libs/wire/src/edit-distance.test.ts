import { describe, expect, it } from 'vitest';
import { editDistance } from './edit-distance.js';

describe('editDistance', () => {
  it('counts insertions, deletions and substitutions', () => {
    expect(editDistance('', '')).toBe(0);
    expect(editDistance('abc', 'abc')).toBe(0);
    expect(editDistance('', 'abc')).toBe(3);
    expect(editDistance('abc', '')).toBe(3);
    expect(editDistance('kitten', 'sitting')).toBe(3);
    expect(editDistance('flaw', 'lawn')).toBe(2);
    expect(editDistance('contineonerror', 'continueonerror')).toBe(1);
    expect(editDistance('ab', 'ba')).toBe(2);
  });

  it('is symmetric', () => {
    for (const [a, b] of [
      ['workdir', 'workingdirectory'],
      ['timeout', 'timeoutseconds'],
      ['x', 'xyz'],
    ] as const) {
      expect(editDistance(a, b)).toBe(editDistance(b, a));
    }
  });
});
