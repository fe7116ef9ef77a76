import { ApiKeyStore } from '@sandstream/bus';
import { SandstreamClient } from '@sandstream/client';
import { TemplateRegistry } from '@sandstream/sandbox';
import { runService } from '@sandstream/service-kit';
import { ApiEnvSchema } from './api-config.js';
import { buildApi } from './app.js';
import { followKeyRevocations } from './key-revocations.js';
import { Principals } from './principal.js';
import { WorkQueues } from './work-queues.js';

runService({
  name: 'api',
  env: ApiEnvSchema,
  waitForRedis: true,
  // Many requests at once each send a command or two: batched into one write per tick. Lua
  // scripts (EVALSHA) go out at once instead: each is a step a request waits on (an exec's push,
  // a job's creation), and auto-pipelining holds it until the end of the event-loop turn; the
  // rate limiter already counts a turn's requests in one call (rate-limiter.ts).
  redis: { overrides: { enableAutoPipelining: true, autoPipeliningIgnoredCommands: ['evalsha'] } },
  async start({ env, logger, keys, redis, onShutdown }) {
    // The SDK is the API's only way to the other services: the same Redis transport a
    // TypeScript caller uses, so the two cannot drift apart.
    const client = new SandstreamClient({
      redis,
      namespace: keys.namespace,
      onWarning: (w) => logger.warn(w.message),
      readyRecheckMs: env.API_READY_RECHECK_MS,
      // A volume's files are read and written in a helper sandbox of the caller's tenant.
      volumeHelperImage: env.API_DEFAULT_IMAGE,
    });
    const apiKeys = new ApiKeyStore({ redis, keys });
    if (
      env.API_ADMIN_KEY &&
      (await apiKeys.register(env.API_ADMIN_KEY, { tenant: 'default', admin: true }))
    ) {
      logger.info('registered the admin key of API_ADMIN_KEY');
    }
    const templates = env.SANDSTREAM_TEMPLATES_FILE
      ? await TemplateRegistry.open({ path: env.SANDSTREAM_TEMPLATES_FILE })
      : undefined;
    const queues = new WorkQueues(redis, keys);
    const principals = new Principals({ store: apiKeys, redis, keys, anonymous: env.API_ANONYMOUS });
    const revocations = await followKeyRevocations(redis, keys, principals);
    const app = await buildApi(
      {
        client,
        redis,
        queues,
        keys,
        principals,
        templates,
        defaults: { template: env.API_DEFAULT_TEMPLATE, image: env.API_DEFAULT_IMAGE },
      },
      {
        bodyLimit: env.API_BODY_LIMIT_BYTES,
        rateLimitPerMinute: env.API_RATE_LIMIT_PER_MINUTE,
        headersTimeoutMs: env.API_HEADERS_TIMEOUT_MS,
        requestTimeoutMs: env.API_REQUEST_TIMEOUT_MS,
        maxOpenRequestsPerKey: env.API_MAX_OPEN_REQUESTS_PER_KEY,
        mcpSessionIdleMs: env.API_MCP_SESSION_IDLE_SECONDS * 1000,
        mcpMaxSessions: env.API_MCP_MAX_SESSIONS,
        mcpMaxSessionsPerKey: env.API_MCP_MAX_SESSIONS_PER_KEY,
        preview: {
          domain: env.SANDSTREAM_PREVIEW_DOMAIN,
          publicUrl: env.API_PUBLIC_URL,
          forward: env.API_PREVIEW_FORWARD,
        },
        ...(env.API_CONSOLE_DIR ? { consoleDir: env.API_CONSOLE_DIR } : {}),
        logger,
      },
    );
    await app.listen({ port: env.API_PORT, host: env.API_HOST });
    const address = app.server.address();
    const port = typeof address === 'object' && address ? address.port : env.API_PORT;
    // Open streams (SSE, shells) end with the server: their clients reconnect to another replica.
    onShutdown('http server', () => app.close());
    onShutdown('sdk client', () => client.close());
    onShutdown('work queues', () => queues.close());
    onShutdown('templates', async () => templates?.close());
    onShutdown('key revocations', async () => revocations.close());
    return {
      checks: { http: async () => app.server.listening },
      info: { apiPort: port, url: `http://${env.API_HOST}:${port}`, anonymous: env.API_ANONYMOUS },
    };
  },
});
