import { type RedisServer, startRedisServer } from '@sandstream/test-support';
import { ReplyError } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandstreamClient } from './client.js';
import { InfrastructureUnavailableError, infrastructureErrorOf } from './infrastructure-errors.js';
import { SandboxNotFoundError } from './sandbox-errors.js';

// The SDK over Redis (a producer connection, as the CLI and the API build it) on a private
// redis-server that is stopped: every kind of call fails with the one typed error, not with
// ioredis's MaxRetriesPerRequestError.
describe('SDK over Redis while Redis is down', () => {
  let redis: RedisServer;
  let client: SandstreamClient;
  beforeAll(async () => {
    redis = await startRedisServer();
    client = new SandstreamClient({ redisUrl: redis.url, namespace: 'infra-down' });
    client.redis.on('error', () => {});
  });
  afterAll(async () => {
    await client?.close().catch(() => undefined);
    await redis?.stop();
  });

  it('jobs, sandboxes and commands reject with InfrastructureUnavailableError, its cause kept', async () => {
    // Up: answers as usual, and a missing sandbox is still its own error.
    expect(await client.get('never-there')).toBeNull();
    await expect(client.sandboxes.handle('never-there').exec('true')).rejects.toBeInstanceOf(
      SandboxNotFoundError,
    );
    await redis.kill();
    const calls: [string, () => Promise<unknown>][] = [
      ['get', () => client.get('j1')],
      ['list', () => client.list({ tenant: 'default' })],
      ['submit', () => client.submit({ id: 'j2', image: 'none', steps: [{ command: 'true' }] })],
      ['cancel', () => client.cancel('j1')],
      ['sandboxes.get', () => client.sandboxes.get('s1')],
      ['sandboxes.list', () => client.sandboxes.list()],
      ['exec', async () => client.sandboxes.handle('s1').exec('true')],
      ['exec as a tenant', async () => client.sandboxes.handle('s1', { tenant: 't' }).exec('true')],
      ['history', () => client.sandboxes.handle('s1').history()],
    ];
    for (const [name, call] of calls) {
      const err = await call().then(
        () => new Error(`${name} resolved`),
        (e: unknown) => e,
      );
      expect(err, name).toBeInstanceOf(InfrastructureUnavailableError);
      expect((err as Error).message, name).toMatch(/^Redis is unavailable: /);
      expect((err as Error).cause, name).toBeInstanceOf(Error);
    }
  }, 60_000);

  it('tells a connection error from an answer of Redis', () => {
    expect(infrastructureErrorOf(new ReplyError('WRONGTYPE Operation against a key'))).toBeUndefined();
    expect(infrastructureErrorOf(new ReplyError('LOADING Redis is loading the dataset'))).toBeInstanceOf(
      InfrastructureUnavailableError,
    );
    expect(infrastructureErrorOf(new Error('Connection is closed.'))).toBeInstanceOf(
      InfrastructureUnavailableError,
    );
    expect(infrastructureErrorOf(new SandboxNotFoundError('s'))).toBeUndefined();
  });
});
