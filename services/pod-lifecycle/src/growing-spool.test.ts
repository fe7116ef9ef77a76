import { createHash, randomBytes } from 'node:crypto';
import { appendFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { GrowingSpool } from './growing-spool.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'growing-spool-test-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

async function drain(source: AsyncIterable<Buffer>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of source) parts.push(part);
  return Buffer.concat(parts);
}

describe('GrowingSpool', () => {
  it('follows the file as it grows, to the size and hash the writer reports', async () => {
    const path = join(dir, 'spool');
    await writeFile(path, '');
    const spool = new GrowingSpool(path);
    const parts = [randomBytes(70_000), randomBytes(1_500_000), randomBytes(10)];
    const read = drain(spool.follow());
    for (const part of parts) {
      await appendFile(path, part);
      spool.grew();
      await new Promise((r) => setTimeout(r, 5));
    }
    const whole = Buffer.concat(parts);
    spool.finish(whole.length, sha(whole));
    expect((await read).equals(whole)).toBe(true);
  });

  it('fails its reader when what it read back is not what the writer hashed', async () => {
    const path = join(dir, 'spool');
    const written = randomBytes(50_000);
    await writeFile(path, written);
    const spool = new GrowingSpool(path);
    spool.finish(written.length, sha(randomBytes(50_000)));
    await expect(drain(spool.follow())).rejects.toThrow(/read back as 50000 bytes hashing to/);
    const short = new GrowingSpool(path);
    short.finish(written.length + 1, sha(written));
    await expect(drain(short.follow())).rejects.toThrow(/written as 50001 bytes/);
  });
});
