import { ApiKeyStore, createKeySpace } from '@sandstream/bus';
import {
  freePort,
  type RedisServer,
  type RunningService,
  startRedisServer,
  startService,
} from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { destroyPoolMembers } from './pool-members.js';
import { type Stack, startStack } from './services-stack.js';

export interface ApiStack {
  /** The four services and an SDK client, on the stack's own Redis. */
  stack: Stack;
  /** The API process (services/api/dist/main.js). */
  api: RunningService;
  /** http://127.0.0.1:<port> */
  url: string;
  redisUrl: string;
  /** A new API key (what `sandstream apikey create` makes). */
  key(tenant: string, admin?: boolean): Promise<{ id: string; key: string }>;
  /** fetch() against the API with a bearer key (or none). */
  request(path: string, init?: RequestInit & { key?: string | undefined }): Promise<Response>;
  /** A live sandbox made through POST /v1/sandboxes with `key` (the default template); its id. */
  createSandbox(key: string): Promise<string>;
  /**
   * A second API process on the same stack, its environment the first's with `apiEnv` over it
   * (benchmarks comparing two settings in one run); stopped with the stack.
   */
  anotherApi(apiEnv: Record<string, string>): Promise<{ api: RunningService; url: string }>;
  stop(): Promise<void>;
}

/**
 * The four services plus the HTTP API as processes, on a private redis-server (job ids are
 * global in a Redis, and seed 003's examples use fixed ones such as `my-sandbox`), anonymous
 * loopback access on as in `npm start`. For the API's suites and benchmarks.
 */
export async function startApiStack(
  options: {
    env?: Record<string, string>;
    apiEnv?: Record<string, string>;
    label?: string;
    /** Node flags of the API process (--cpu-prof …). */
    apiNodeArgs?: string[];
    /** Arguments of the stack's redis-server (`--bind` a Docker network's gateway too). */
    redisArgs?: string[];
  } = {},
): Promise<ApiStack> {
  const redisServer: RedisServer = await startRedisServer(
    options.redisArgs ? { args: options.redisArgs } : {},
  );
  const redisUrl = redisServer.url;
  let stack: Stack | undefined;
  try {
    stack = await startStack({
      label: options.label ?? 'api',
      env: { REDIS_URL: redisUrl, ...options.env },
      redis: () => new Redis(redisUrl),
    });
    const port = await freePort();
    const apiEnv = {
      ...stack.env,
      REDIS_URL: redisUrl,
      API_ANONYMOUS: 'loopback',
      API_DEFAULT_IMAGE: 'debian:bookworm-slim',
      ...options.apiEnv,
    };
    const nodeArgs = options.apiNodeArgs ? { nodeArgs: options.apiNodeArgs } : {};
    const api = await startService('api', { ...apiEnv, API_PORT: String(port) }, nodeArgs);
    const others: RunningService[] = [];
    const url = `http://127.0.0.1:${port}`;
    const keys = new ApiKeyStore({ redis: stack.redis, keys: createKeySpace(stack.namespace) });
    const running = stack;
    const request: ApiStack['request'] = (path, init = {}) => {
      const { key, ...rest } = init;
      const headers = new Headers(rest.headers);
      if (key !== undefined) headers.set('authorization', `Bearer ${key}`);
      return fetch(`${url}${path}`, { ...rest, headers });
    };
    return {
      stack: running,
      api,
      url,
      redisUrl,
      key: async (tenant, admin = false) => {
        const { key, info } = await keys.create({ tenant, admin });
        return { id: info.id, key };
      },
      request,
      createSandbox: async (key) => {
        const created = await request('/v1/sandboxes', {
          method: 'POST',
          key,
          headers: { 'content-type': 'application/json' },
          body: '{}',
        });
        if (created.status !== 201 && created.status !== 200)
          throw new Error(`POST /v1/sandboxes: ${created.status} ${await created.text()}`);
        return ((await created.json()) as { id: string }).id;
      },
      anotherApi: async (overrides) => {
        const otherPort = await freePort();
        const other = await startService(
          'api',
          { ...apiEnv, API_PORT: String(otherPort), ...overrides },
          nodeArgs,
        );
        others.push(other);
        return { api: other, url: `http://127.0.0.1:${otherPort}` };
      },
      stop: async () => {
        await Promise.all(others.map((other) => other.stop(15_000)));
        await api.stop(15_000);
        await running.stop();
        // Warm pool members outlive pod-lifecycle on purpose; this stack's go with its Redis.
        const redis = new Redis(redisUrl);
        await destroyPoolMembers(redis, running.namespace, {}).finally(() => redis.disconnect());
        await redisServer.stop();
      },
    };
  } catch (err) {
    await stack?.stop();
    await redisServer.stop();
    throw err;
  }
}
