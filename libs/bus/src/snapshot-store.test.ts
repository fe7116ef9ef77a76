import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { NatsServer } from '@sandstream/test-support';
import { connect, type NatsConnection, StorageType } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SnapshotIntegrityError, SnapshotStore, snapshotBucketName } from './snapshot-store.js';

let nats: NatsServer;
let nc: NatsConnection;
beforeAll(async () => {
  nats = await NatsServer.start({ jetstream: true });
  nc = await connect({ servers: nats.url });
});
afterAll(async () => {
  await nc?.close();
  await nats?.stop();
});

async function bytesOf(stream: AsyncIterable<unknown>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of stream) parts.push(Buffer.from(part as Uint8Array));
  return Buffer.concat(parts);
}

describe('SnapshotStore', () => {
  it('stores in 1 MB chunks that nats.js reads back with its own digest check, and reads what nats.js stored', async () => {
    const store = new SnapshotStore(nc, 'store-test');
    const data = randomBytes(3 * 1024 * 1024 + 12_345);
    // Pieces of odd sizes, as the encoder hands them out.
    const put = await store.put(
      's1',
      Readable.from([data.subarray(0, 1000), data.subarray(1000, 2_500_000), data.subarray(2_500_000)]),
    );
    expect(put).toEqual({ sizeBytes: data.length, sha256: createHash('sha256').update(data).digest('hex') });

    const os = await nc.jetstream().views.os(snapshotBucketName('store-test'), { storage: StorageType.File });
    const info = await os.info('s1');
    expect(info?.chunks).toBe(4);
    expect(info?.size).toBe(data.length);
    const got = await os.get('s1');
    expect((await bytesOf(got?.data as AsyncIterable<unknown> & ReadableStream)).equals(data)).toBe(true);
    expect(await got?.error).toBeFalsy();
    expect((await bytesOf(await store.open('s1', put))).equals(data)).toBe(true);

    // Written by nats.js's own put (snapshots stored before this store wrote chunks itself).
    await os.put({ name: 'legacy' }, Readable.toWeb(Readable.from([data])) as ReadableStream<Uint8Array>);
    expect((await bytesOf(await store.open('legacy', put))).equals(data)).toBe(true);

    await expect(store.open('legacy', { ...put, sizeBytes: put.sizeBytes + 1 })).rejects.toThrow(
      SnapshotIntegrityError,
    );

    // Streamed as read: the same bytes, and a stream that fails at its end, naming what is wrong,
    // when they are not what the record says (after every byte went by: the reader throws away
    // what it wrote).
    expect((await bytesOf(store.stream('s1', put))).equals(data)).toBe(true);
    await expect(bytesOf(store.stream('s1', { ...put, sizeBytes: put.sizeBytes + 1 }))).rejects.toThrow(
      /snapshot s1 is truncated in storage/,
    );
    const seen: number[] = [];
    const damaged = store.stream('s1', { ...put, sha256: '0'.repeat(64) });
    await expect(
      (async () => {
        for await (const chunk of damaged) seen.push((chunk as Buffer).length);
      })(),
    ).rejects.toThrow(/snapshot s1 is damaged in storage/);
    expect(seen.reduce((a, b) => a + b, 0)).toBe(data.length);
    await store.delete('s1');
    await store.delete('legacy');
    expect(await store.names()).toEqual([]);
    expect(await store.unreferencedChunks()).toEqual([]);
  });
});
