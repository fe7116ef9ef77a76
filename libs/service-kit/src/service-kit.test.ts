import { Writable } from 'node:stream';
import { DEFAULT_COMPLETION_SHARDS, DEFAULT_NAMESPACE } from '@sandstream/bus';
import { createLogger } from '@sandstream/telemetry';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError, intVar, loadEnvConfig } from './env-config.js';
import { GracefulShutdown } from './graceful-shutdown.js';
import { startHealthServer } from './health-server.js';
import { SharedEnv, serviceEnvSchema } from './service-env.js';

const quiet = createLogger({
  service: 'test',
  destination: new Writable({ write: (_c, _e, cb) => cb() }),
});

describe('env config', () => {
  const schema = z.object({ SLOTS: intVar(1, 100, 10), NAME: z.string().min(2, 'must be 2+ chars') });
  it('names every broken variable and its rule at once', () => {
    try {
      loadEnvConfig('svc', schema, { SLOTS: '500', NAME: 'x' });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as Error).message).toBe(
        'svc: invalid configuration: SLOTS: must be at most 100; NAME: must be 2+ chars',
      );
    }
  });
  it('applies defaults and treats blank as unset', () => {
    expect(loadEnvConfig('svc', schema, { SLOTS: ' ', NAME: 'ok' })).toEqual({ SLOTS: 10, NAME: 'ok' });
  });
});

describe('service env', () => {
  const schema = serviceEnvSchema(8089).extend({ COMPLETION_SHARDS: SharedEnv.COMPLETION_SHARDS });
  it('gives every service the same defaults for what they must agree on', () => {
    expect(loadEnvConfig('svc', schema, {})).toMatchObject({
      REDIS_URL: 'redis://127.0.0.1:6379',
      SANDSTREAM_NAMESPACE: DEFAULT_NAMESPACE,
      HEALTH_PORT: 8089,
      COMPLETION_SHARDS: DEFAULT_COMPLETION_SHARDS,
    });
  });
  it('names a bad shared variable like any other', () => {
    const load = () => loadEnvConfig('svc', schema, { COMPLETION_SHARDS: '0', SANDSTREAM_NAMESPACE: 'a b' });
    expect(load).toThrow(/SANDSTREAM_NAMESPACE: letters, digits/);
    expect(load).toThrow(/COMPLETION_SHARDS: must be at least 1/);
  });
});

describe('health server', () => {
  it('answers liveness, readiness with failing checks named, and draining', async () => {
    let redisUp = false;
    const server = await startHealthServer({
      port: 0,
      host: '127.0.0.1',
      checks: { redis: async () => redisUp },
    });
    const url = `http://127.0.0.1:${server.port}`;
    try {
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
      const notReady = await fetch(`${url}/readyz`);
      expect(notReady.status).toBe(503);
      expect(await notReady.json()).toEqual({ status: 'not-ready', checks: { redis: 'failing' } });
      redisUp = true;
      expect((await fetch(`${url}/readyz`)).status).toBe(200);
      server.markDraining();
      const draining = await fetch(`${url}/readyz`);
      expect(draining.status).toBe(503);
      expect(((await draining.json()) as { status: string }).status).toBe('draining');
    } finally {
      await server.close();
    }
  });
});

describe('health server liveness', () => {
  it('fails /healthz, naming the check, only when a liveness check fails', async () => {
    let recoverable = true;
    const server = await startHealthServer({
      port: 0,
      checks: { nats: async () => false },
      liveness: { nats: async () => recoverable },
    });
    const url = `http://127.0.0.1:${server.port}`;
    try {
      // Down but recovering: not ready, still alive (a restart would not help).
      expect((await fetch(`${url}/readyz`)).status).toBe(503);
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
      recoverable = false;
      const dead = await fetch(`${url}/healthz`);
      expect(dead.status).toBe(503);
      expect(await dead.json()).toEqual({ status: 'failing', checks: { nats: 'failing' } });
    } finally {
      await server.close();
    }
  });
});

describe('graceful shutdown', () => {
  it('runs steps in order once, aborts the signal, and exits with the code', async () => {
    const order: string[] = [];
    const codes: number[] = [];
    const shutdown = new GracefulShutdown({ logger: quiet, exit: (c) => codes.push(c), signals: [] });
    shutdown.add('stop workers', async () => {
      expect(shutdown.signal.aborted).toBe(true);
      // A stop step that takes time on purpose: the next step must wait for it, not overlap it.
      await new Promise((r) => setTimeout(r, 20));
      order.push('workers');
    });
    shutdown.add('close redis', async () => {
      order.push('redis');
    });
    await Promise.all([shutdown.shutdown(0), shutdown.shutdown(0)]);
    expect(order).toEqual(['workers', 'redis']);
    expect(codes).toEqual([0]);
  });
  it('exits 1 when a step fails but still runs the later steps', async () => {
    const codes: number[] = [];
    const ran: string[] = [];
    const shutdown = new GracefulShutdown({ logger: quiet, exit: (c) => codes.push(c), signals: [] });
    shutdown.add('boom', async () => {
      throw new Error('boom');
    });
    shutdown.add('after', async () => {
      ran.push('after');
    });
    await shutdown.shutdown();
    expect(ran).toEqual(['after']);
    expect(codes).toEqual([1]);
  });
});
