import { connect, createServer } from 'node:net';
import { Redis } from 'ioredis';
import { describe, expect, vi } from 'vitest';
import { test } from './fixtures.js';
import { pollUntil } from './poll.js';

describe('test-support fixtures', () => {
  test('port is free to listen on', async ({ port }) => {
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    await new Promise((r) => server.close(r));
  });

  test('redisServer: a restart without appendOnly comes back empty', async ({ redisServer }) => {
    const client = new Redis(redisServer.url, { maxRetriesPerRequest: 1, retryStrategy: () => 50 });
    client.on('error', () => {});
    try {
      await client.set('k', 'v');
      expect(await client.get('k')).toBe('v');
      await redisServer.kill();
      expect(redisServer.running).toBe(false);
      await redisServer.start();
      await vi.waitFor(async () => expect(await client.get('k')).toBeNull());
    } finally {
      client.disconnect();
    }
  });

  describe('with appendOnly', () => {
    test.scoped({ redisOptions: { appendOnly: true } });
    test('a restart keeps what was fsynced; empty throws it away', async ({ redisServer }) => {
      const client = new Redis(redisServer.url, { maxRetriesPerRequest: 1, retryStrategy: () => 50 });
      client.on('error', () => {});
      try {
        await client.set('k', 'v');
        // appendfsync everysec: wait for the fsync rather than guess how long it takes.
        await vi.waitFor(async () => {
          const info = await client.info('persistence');
          expect(info).toMatch(/aof_last_write_status:ok/);
          expect(info).toMatch(/aof_pending_bio_fsync:0/);
        });
        await client.call('BGREWRITEAOF');
        await vi.waitFor(async () =>
          expect(await client.info('persistence')).toMatch(/aof_rewrite_in_progress:0/),
        );
        await redisServer.kill();
        await redisServer.start();
        await vi.waitFor(async () => expect(await client.get('k')).toBe('v'));
        await redisServer.kill();
        await redisServer.start({ empty: true });
        await vi.waitFor(async () => expect(await client.get('k')).toBeNull());
      } finally {
        client.disconnect();
      }
    });
  });

  test('redisCluster routes keys to their slot owners', async ({ redisCluster }) => {
    const client = await redisCluster.connect();
    try {
      expect(redisCluster.nodes).toHaveLength(3);
      for (let i = 0; i < 20; i++) await client.set(`key-${i}`, String(i));
      const sizes = await Promise.all(client.nodes('master').map((n) => n.dbsize()));
      expect(sizes.filter((n) => n > 0).length).toBeGreaterThan(1);
      await expect(client.mget('a', 'b')).rejects.toThrow(/CROSSSLOT/);
    } finally {
      client.disconnect();
    }
  });

  test('natsServer greets with INFO', async ({ natsServer }) => {
    const greeting = await new Promise<string>((resolve, reject) => {
      const socket = connect(natsServer.port, '127.0.0.1');
      socket.once('error', reject);
      socket.once('data', (chunk) => {
        socket.destroy();
        resolve(chunk.toString());
      });
    });
    expect(greeting).toMatch(/^INFO \{.*"jetstream":true/);
  });

  test('docker answers ping', async ({ docker }) => {
    expect(String(await docker.ping())).toBe('OK');
  });

  test('pollUntil returns the first truthy value and names what timed out', async () => {
    let n = 0;
    expect(await pollUntil('n to reach 3', () => ++n >= 3 && n, { intervalMs: 1 })).toBe(3);
    await expect(pollUntil('never', () => false, { timeoutMs: 30, intervalMs: 5 })).rejects.toThrow(
      /waiting for never/,
    );
  });
});
