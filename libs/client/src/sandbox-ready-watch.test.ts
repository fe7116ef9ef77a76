import { createServer, type Server, type Socket } from 'node:net';
import { createKeySpace, type SandboxRecord } from '@sandstream/bus';
import { testRedisUrl } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { ReaderPool } from './reader-pool.js';
import { waitReadyByEvent } from './sandbox-ready-watch.js';

// A readiness wait whose blocking reader never answers (a connection that never became ready,
// or hung) must not outlive the wait: the stuck read is dropped, the record read, and the wait
// goes on with a fresh reader.
const redis = new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
const sockets: Socket[] = [];
const silent: Server = createServer((socket) => {
  sockets.push(socket); // accepts, never answers
});
await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
const port = (silent.address() as { port: number }).port;
const hung = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: null });
hung.on('error', () => {});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  silent.close();
  hung.disconnect();
  redis.disconnect();
});

describe('waitReadyByEvent', () => {
  it('goes on past a blocking read that never answers, and ends when the record is ready', async () => {
    const readers = new ReaderPool(hung);
    let reads = 0;
    const record = (state: string) => ({ id: 'w', state }) as unknown as SandboxRecord;
    const get = async () => record(++reads >= 2 ? 'ready' : 'starting');
    const ready = await waitReadyByEvent(
      { redis, keys: createKeySpace(`t-rwatch-${process.pid}`), readers, recheckMs: 100 },
      get,
      'w',
      60,
      undefined,
    );
    expect(ready.state).toBe('ready');
    expect(reads).toBe(2);
    readers.close();
  }, 30_000);
});
