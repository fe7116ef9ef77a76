import { SandstreamClient } from '@sandstream/client';
import { freePort, type RunningService, startService, testRedisUrl } from '@sandstream/test-support';
import type { Stack } from './services-stack.js';

/** The two ways the SDK and the CLI reach a deployment; suites run once per transport. */
export type Transport = 'redis' | 'http';
export const TRANSPORTS: readonly Transport[] = ['redis', 'http'];

/** A stack as one transport sees it: its client, more clients like it, and how the CLI connects. */
export interface TransportView {
  transport: Transport;
  /** The suite's client (the stack's own over Redis, one over the API over HTTP). */
  client: SandstreamClient;
  /** Another client, as a second process or a restarted worker would make one; close it after use. */
  newClient(): SandstreamClient;
  /** The connection flags for `sandstream …` (`--redis-url … --namespace …`, or `--url …`). */
  cliFlags: string[];
  /** The environment a client in another process connects with. */
  clientEnv: Record<string, string>;
  /** The API's URL (http only). */
  url?: string;
  stop(): Promise<void>;
}

/**
 * The view of `stack` through `transport`. Over HTTP it starts the API service (services/api)
 * on the stack's Redis and namespace, with anonymous loopback access as `npm start` has it.
 */
export async function viewThrough(
  stack: Stack,
  transport: Transport,
  redisUrl = testRedisUrl(),
): Promise<TransportView> {
  if (transport === 'redis') {
    return {
      transport,
      client: stack.client,
      newClient: () => new SandstreamClient({ redisUrl, namespace: stack.namespace }),
      cliFlags: ['--redis-url', redisUrl, '--namespace', stack.namespace],
      clientEnv: { REDIS_URL: redisUrl, SANDSTREAM_NAMESPACE: stack.namespace },
      stop: async () => {},
    };
  }
  const port = await freePort();
  const api: RunningService = await startService('api', {
    ...stack.env,
    REDIS_URL: redisUrl,
    API_PORT: String(port),
    API_ANONYMOUS: 'loopback',
    API_DEFAULT_IMAGE: 'debian:bookworm-slim',
  });
  const url = `http://127.0.0.1:${port}`;
  const client = new SandstreamClient({ url });
  return {
    transport,
    client,
    newClient: () => new SandstreamClient({ url }),
    cliFlags: ['--url', url],
    clientEnv: { SANDSTREAM_URL: url },
    url,
    stop: async () => {
      await client.close();
      await api.stop(15_000);
    },
  };
}
