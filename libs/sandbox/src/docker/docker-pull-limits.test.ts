import { randomBytes } from 'node:crypto';
import { createServer, type Server, type Socket } from 'node:net';
import { dockerEngine } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxStartError } from '../backend.js';
import { dockerOptionsFromEnv } from '../backend-env.js';
import { pullImage } from './image-pull.js';

// A registry that accepts the engine's connection and never answers must not hold a create
// forever: the pull gives up after its stall limit or its overall limit, naming the setting.
const { docker, skip } = await dockerEngine('docker pull limits');

describe.skipIf(skip)('Docker image pull: time limits', () => {
  let server: Server;
  let port: number;
  const sockets: Socket[] = [];

  beforeAll(async () => {
    server = createServer((socket) => {
      sockets.push(socket); // accepted, never answered
      socket.on('error', () => {});
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as { port: number }).port;
  });

  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const image = () => `127.0.0.1:${port}/stalled-${randomBytes(3).toString('hex')}:1`;

  it('a registry that never answers fails the pull at the stall limit, naming the setting', async () => {
    const err = await pullImage(docker, image(), { limits: { timeoutMs: 60_000, stallMs: 2_000 } }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(SandboxStartError);
    expect((err as SandboxStartError).reason).toBe('image_pull');
    expect((err as Error).message).toMatch(
      /made no progress for 2 s \(SANDSTREAM_DOCKER_PULL_STALL_SECONDS\)/,
    );
    expect(sockets.length).toBeGreaterThan(0); // the engine did reach the stalling registry
  }, 30_000);

  it('the overall limit applies even while the stall limit is longer', async () => {
    const err = await pullImage(docker, image(), { limits: { timeoutMs: 2_000, stallMs: 60_000 } }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(SandboxStartError);
    expect((err as Error).message).toMatch(/within 2 s \(SANDSTREAM_DOCKER_PULL_TIMEOUT_SECONDS\)/);
  }, 30_000);
});

describe('pull limit settings', () => {
  it('are read from the environment in seconds', () => {
    expect(dockerOptionsFromEnv({ SANDSTREAM_DOCKER_PULL_STALL_SECONDS: '30' }).pullLimits).toEqual({
      timeoutMs: 600_000,
      stallMs: 30_000,
    });
    expect(dockerOptionsFromEnv({}).pullLimits).toBeUndefined();
  });

  it('refuse values out of range, naming the variable and the limit', () => {
    expect(() => dockerOptionsFromEnv({ SANDSTREAM_DOCKER_PULL_TIMEOUT_SECONDS: '0' })).toThrow(
      /SANDSTREAM_DOCKER_PULL_TIMEOUT_SECONDS must be at least 1 second/,
    );
    expect(() => dockerOptionsFromEnv({ SANDSTREAM_DOCKER_PULL_STALL_SECONDS: '7200' })).toThrow(
      /SANDSTREAM_DOCKER_PULL_STALL_SECONDS must be at most 3600 seconds/,
    );
    expect(() => dockerOptionsFromEnv({ SANDSTREAM_DOCKER_PULL_STALL_SECONDS: 'soon' })).toThrow(
      /SANDSTREAM_DOCKER_PULL_STALL_SECONDS/,
    );
  });
});
