import { randomBytes } from 'node:crypto';
import { type RedisServer, startRedisServer } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RawListConnection, rawOptionsFromUrl } from './raw-list-connection.js';

// A private redis-server with an ACL user limited to its own keys, as a sandbox's agent is.
describe('RawListConnection', () => {
  let own: RedisServer;
  let url: string;
  beforeAll(async () => {
    own = await startRedisServer({
      args: [
        '--user',
        'sbx',
        'on',
        '>s3cret',
        '~own:*',
        '+lpush',
        '+brpop',
        '+llen',
        '+expire',
        '+unlink',
        '+set',
      ],
    });
    const parsed = new URL(own.url);
    url = `redis://sbx:s3cret@${parsed.host}/0`;
  });
  afterAll(async () => {
    await own?.stop();
  });

  it('pushes a value written as pieces and pops it back byte for byte, in the pieces the socket delivered', async () => {
    const redis = await RawListConnection.open(rawOptionsFromUrl(url));
    try {
      // 3 MiB: arrives over many socket reads, so the reply is assembled across them.
      const pieces = [randomBytes(1024 * 1024 + 7), randomBytes(13), randomBytes(2 * 1024 * 1024)];
      expect(await redis.push('own:list', pieces, 60)).toBe(1);
      expect(await redis.push('own:list', [], 60)).toBe(2); // the end marker: an empty value
      expect(await redis.llen('own:list')).toBe(2);
      const popped = await redis.pop('own:list', 1);
      expect(popped?.length).toBeGreaterThan(1);
      expect(Buffer.concat(popped ?? []).equals(Buffer.concat(pieces))).toBe(true);
      expect(await redis.pop('own:list', 1)).toEqual([]);
      // BRPOP that times out: null, not an error.
      expect(await redis.pop('own:list', 1)).toBeNull();
    } finally {
      redis.close();
    }
  });

  it('answers commands sent together in order, values of CRLF bytes included', async () => {
    const redis = await RawListConnection.open(rawOptionsFromUrl(url));
    try {
      const values = Array.from({ length: 50 }, (_, i) => Buffer.from(`\r\n$${i}\r\n*2\r\n`.repeat(i + 1)));
      const lengths = await Promise.all(values.map((v) => redis.push('own:crlf', [v], 60)));
      expect(lengths).toEqual(values.map((_, i) => i + 1));
      const back = await Promise.all(values.map(() => redis.pop('own:crlf', 1)));
      expect(back.map((p) => Buffer.concat(p ?? []).toString())).toEqual(values.map((v) => v.toString()));
    } finally {
      redis.close();
    }
  });

  it("refuses what the user may not do with Redis' own words, and a wrong password at open", async () => {
    const redis = await RawListConnection.open(rawOptionsFromUrl(url));
    try {
      await expect(redis.push('other:list', [Buffer.from('x')], 60)).rejects.toThrow(/NOPERM/);
      // The connection goes on after an error reply.
      expect(await redis.push('own:after', [Buffer.from('x')], 60)).toBe(1);
      await redis.unlink('own:after');
    } finally {
      redis.close();
    }
    await expect(RawListConnection.open(rawOptionsFromUrl(url.replace('s3cret', 'wrong')))).rejects.toThrow(
      /WRONGPASS/,
    );
  });

  it('rejects a pending pop when closed, and every later command', async () => {
    const redis = await RawListConnection.open(rawOptionsFromUrl(url));
    const pending = redis.pop('own:never', 30);
    redis.close();
    await expect(pending).rejects.toThrow(/closed/);
    await expect(redis.llen('own:never')).rejects.toThrow(/closed/);
  });

  it('reads its options from a URL', () => {
    expect(rawOptionsFromUrl('rediss://u%40x:p%3Aw@example.internal:6380/3')).toEqual({
      host: 'example.internal',
      port: 6380,
      username: 'u@x',
      password: 'p:w',
      db: 3,
      tls: { servername: 'example.internal' },
    });
    expect(rawOptionsFromUrl('redis://127.0.0.1')).toMatchObject({
      host: '127.0.0.1',
      port: 6379,
      db: undefined,
    });
  });
});
