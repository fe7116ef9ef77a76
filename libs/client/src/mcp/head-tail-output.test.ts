import { describe, expect, it } from 'vitest';
import { HeadTailOutput } from './head-tail-output.js';

describe('HeadTailOutput', () => {
  it('keeps everything that fits, unmarked', () => {
    const out = new HeadTailOutput(16, 16);
    for (const line of ['a', 'b', 'c']) out.add(line);
    expect(out.text()).toBe('a\nb\nc\n');
    expect(out.omittedBytes).toBe(0);
  });

  it('keeps the first and last lines whole and counts the bytes cut between them', () => {
    const out = new HeadTailOutput(8, 8);
    for (let i = 1; i <= 100; i++) out.add(String(i));
    // Head: 1..4 (8 bytes); tail: 97..100 ("97\n98\n" does not fit beside "99\n100\n": 3 + 4 = 7).
    expect(out.text()).toBe(
      '1\n2\n3\n4\n[… 277 bytes of output cut here; the first 8 and last 7 bytes are shown …]\n99\n100\n',
    );
    const total = Array.from({ length: 100 }, (_, i) => `${i + 1}\n`).join('').length;
    expect(out.omittedBytes).toBe(total - 8 - 7);
  });

  it('keeps the end of one line longer than the tail', () => {
    const out = new HeadTailOutput(4, 6);
    out.add('x'.repeat(20));
    expect(out.text()).toMatch(
      /^\[… 15 bytes of output cut here; the first 0 and last 6 bytes are shown …\]\nxxxxx\n$/,
    );
  });
});
