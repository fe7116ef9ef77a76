import type Docker from 'dockerode';
import { test as base } from 'vitest';
import { dockerEngine } from './docker.js';
import { NatsServer } from './nats-server.js';
import { freePort } from './ports.js';
import { RedisCluster } from './redis-cluster.js';
import { RedisServer, type RedisServerOptions } from './redis-server.js';

export interface SandstreamFixtures {
  /** Options for `redisServer`; override per suite with `test.scoped({ redisOptions: { … } })`. */
  redisOptions: RedisServerOptions;
  /** A private redis-server for this test, stopped after it (kill, pause and restart freely). */
  redisServer: RedisServer;
  /** A three-master Redis Cluster for this test. */
  redisCluster: RedisCluster;
  /** A private nats-server (JetStream on) for this test. */
  natsServer: NatsServer;
  /** A Docker client; the test is skipped when no engine answers outside CI. */
  docker: Docker;
  /** A free TCP port on 127.0.0.1. */
  port: number;
}

/**
 * vitest's `test` with the servers a Sandstream test needs as fixtures. Each one is created only
 * when a test destructures it, and torn down after that test even when it fails.
 */
export const test = base.extend<SandstreamFixtures>({
  redisOptions: [{}, { injected: false }],
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads fixture dependencies from the destructuring.
  port: async ({}, use) => {
    await use(await freePort());
  },
  redisServer: async ({ redisOptions }, use) => {
    const server = await RedisServer.start(redisOptions);
    try {
      await use(server);
    } finally {
      await server.stop();
    }
  },
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads fixture dependencies from the destructuring.
  redisCluster: async ({}, use) => {
    const cluster = await RedisCluster.start(3);
    try {
      await use(cluster);
    } finally {
      await cluster.stop();
    }
  },
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads fixture dependencies from the destructuring.
  natsServer: async ({}, use) => {
    const server = await NatsServer.start();
    try {
      await use(server);
    } finally {
      await server.stop();
    }
  },
  docker: async ({ skip }, use) => {
    const engine = await dockerEngine();
    if (engine.skip) skip(engine.skip);
    await use(engine.docker);
  },
});

export const it = test;
