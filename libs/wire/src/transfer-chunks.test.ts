import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { chunkPieces, readAhead } from './transfer-chunks.js';

describe('chunkPieces', () => {
  it('regroups pieces into chunks of the size asked, the last one shorter', async () => {
    const pieces = [Buffer.from('abc'), Buffer.from('defgh'), Buffer.from('ij')];
    const chunks: string[] = [];
    for await (const parts of chunkPieces(Readable.from(pieces), 4))
      chunks.push(Buffer.concat(parts).toString());
    expect(chunks).toEqual(['abcd', 'efgh', 'ij']);
  });
});

describe('readAhead', () => {
  it('asks the source for the next item while the consumer still works on the current one, one ahead only', async () => {
    const asked: number[] = [];
    async function* source() {
      for (let i = 0; i < 4; i++) {
        asked.push(i);
        yield i;
      }
    }
    const seen: string[] = [];
    for await (const item of readAhead(source())) {
      // Let the pending read run, as a Redis round trip would.
      await new Promise((resolve) => setTimeout(resolve, 5));
      seen.push(`${item}: asked ${asked.join(',')}`);
    }
    expect(seen).toEqual(['0: asked 0,1', '1: asked 0,1,2', '2: asked 0,1,2,3', '3: asked 0,1,2,3']);
  });

  it('ends the source when the consumer stops early, and passes its error on', async () => {
    let closed = false;
    async function* source() {
      try {
        for (let i = 0; ; i++) yield i;
      } finally {
        closed = true;
      }
    }
    for await (const item of readAhead(source())) if (item === 2) break;
    await expect.poll(() => closed).toBe(true);

    async function* failing() {
      yield 1;
      throw new Error('disk gone');
    }
    const items: number[] = [];
    await expect(
      (async () => {
        for await (const item of readAhead(failing())) items.push(item);
      })(),
    ).rejects.toThrow('disk gone');
    expect(items).toEqual([1]);
  });
});
