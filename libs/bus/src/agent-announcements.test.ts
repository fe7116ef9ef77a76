import { type RedisServer, startRedisServer } from '@sandstream/test-support';
import { sandboxKeys } from '@sandstream/wire';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentAnnouncements, jobIdOfReadyChannel } from './agent-announcements.js';

// A private redis-server: the last test kills and restarts it.
let server: RedisServer;
let publisher: Redis;
let subscriber: Redis;
let announcements: AgentAnnouncements;
const announce = (jobId: string) => publisher.publish(sandboxKeys(jobId, 'tagged').ready, '4242');

beforeAll(async () => {
  server = await startRedisServer();
  publisher = new Redis(server.url, { maxRetriesPerRequest: null });
  subscriber = new Redis(server.url, { maxRetriesPerRequest: null });
  subscriber.on('error', () => {}); // the restart below
  announcements = new AgentAnnouncements(subscriber);
  await announcements.start();
});

afterAll(async () => {
  await announcements.close();
  subscriber.disconnect();
  publisher.disconnect();
  await server.stop();
});

describe('agent announcements', () => {
  it('reads the job id of a tagged ready channel only', () => {
    expect(jobIdOfReadyChannel('sandbox:{job-1}:ready')).toBe('job-1');
    expect(jobIdOfReadyChannel('sandbox:job-1:ready')).toBeNull();
    expect(jobIdOfReadyChannel('sandbox:{}:ready')).toBeNull();
    expect(jobIdOfReadyChannel('sandbox:{job-1}:heartbeat')).toBeNull();
  });

  it('wakes the wait of the announced job at once, and only that one', async () => {
    const a = announcements.expect('job-a');
    const b = announcements.expect('job-b');
    const started = Date.now();
    const waitA = a.next(5_000);
    const waitB = b.next(300);
    expect(await announce('job-a')).toBe(1); // one subscriber heard it
    expect(await waitA).toBe(true);
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(await waitB).toBe(false);
    // Heard once, it stays heard.
    expect(await a.next(10)).toBe(true);
    a.close();
    b.close();
    expect(announcements.pending).toBe(0);
  });

  it('hears an announcement made before the wait began (registered first, as a start does)', async () => {
    const wait = announcements.expect('job-early');
    // Delivered: the subscriber emitted it to the announcements' listener, registered before this one.
    const delivered = new Promise<void>((resolve) => {
      const onMessage = (_pattern: string, channel: string) => {
        if (channel !== sandboxKeys('job-early', 'tagged').ready) return;
        subscriber.off('pmessage', onMessage);
        resolve();
      };
      subscriber.on('pmessage', onMessage);
    });
    await announce('job-early');
    await delivered;
    expect(await wait.next(10)).toBe(true);
    wait.close();
  });

  it('hears announcements again after Redis restarts (ioredis subscribes again)', async () => {
    await server.kill();
    await server.start();
    const wait = announcements.expect('job-after');
    // Subscribed again once the reconnect is through: announce until heard.
    await expect
      .poll(
        async () => {
          await announce('job-after').catch(() => 0);
          return wait.next(100);
        },
        { timeout: 15_000, interval: 100 },
      )
      .toBe(true);
    wait.close();
  });
});
