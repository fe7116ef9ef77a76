import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import websocket from '@fastify/websocket';
import type { Logger } from '@sandstream/telemetry';
import Fastify, { type FastifyBaseLogger, LogController } from 'fastify';
import {
  jsonSchemaTransform,
  jsonSchemaTransformObject,
  serializerCompiler,
  validatorCompiler,
  type ZodTypeProvider,
} from 'fastify-type-provider-zod';
import { parse as parseYaml } from 'yaml';
import { answerBeforeBody } from './answer-before-body.js';
import type { ApiContext } from './api-context.js';
import { consoleFiles, DEFAULT_CONSOLE_DIR } from './console-files.js';
import { e2bRoutes } from './e2b/e2b-routes.js';
import { mcpRoutes } from './mcp/mcp-routes.js';
import { McpSessions } from './mcp/mcp-sessions.js';
import { access, authentication } from './plugins/authentication.js';
import { previewProxy, rewritePreviewUrl } from './plugins/preview-proxy.js';
import { problemReplies } from './plugins/problem-replies.js';
import { rateLimiting } from './plugins/rate-limiting.js';
import type { PreviewConfig } from './preview-config.js';
import { HttpProblem, sendProblem } from './problem.js';
import { traceRequests } from './request-spans.js';
import { adminQueueRoutes } from './routes/admin-queues.js';
import { authRoutes } from './routes/auth.js';
import { catalogRoutes } from './routes/catalog.js';
import { jobRoutes } from './routes/jobs.js';
import { listEventRoutes } from './routes/list-events.js';
import { sandboxFileRoutes } from './routes/sandbox-files.js';
import { sandboxPortRoutes } from './routes/sandbox-ports.js';
import { sandboxProcessRoutes } from './routes/sandbox-processes.js';
import { sandboxShellRoutes } from './routes/sandbox-shell.js';
import { sandboxRoutes } from './routes/sandboxes.js';
import { seedAliasRoutes } from './routes/seed-aliases.js';
import { snapshotRoutes } from './routes/snapshots.js';
import { volumeRoutes } from './routes/volumes.js';
import { endFollowers } from './sse.js';
import { TraceLinks } from './trace-links.js';

export interface ApiOptions {
  /** The largest body read into memory. */
  bodyLimit: number;
  /** Requests per minute per key (per address without one), shared through Redis. */
  rateLimitPerMinute: number;
  /** How long a client may take to send a request's headers; its whole request (Node's own bounds). */
  headersTimeoutMs?: number;
  requestTimeoutMs?: number;
  /** Requests open at once per key (per address without one) on this replica. */
  maxOpenRequestsPerKey?: number;
  /** Preview URLs of sandbox ports (default: domain localhost, URLs from the request's Host). */
  preview?: PreviewConfig;
  /** An MCP session (/mcp) with no request open for this long ends, closing the sandboxes it created (default 30 min). */
  mcpSessionIdleMs?: number;
  /** MCP sessions this replica holds at most (default 1000), and one key (default 64). */
  mcpMaxSessions?: number;
  mcpMaxSessionsPerKey?: number;
  /** Service version shown in the OpenAPI document. */
  version?: string;
  /** The web console's built files (default: the repo's console/dist). */
  consoleDir?: string;
  logger?: Logger;
}

/**
 * The HTTP API as a Fastify instance (not listening): main.ts serves it, tests and benchmarks
 * build their own. Every /v1 and /api route authenticates first (principal.ts), is rate limited
 * per key through Redis, validates its input with the libs' zod schemas and answers errors as
 * problem details.
 */
/** Methods whose requests carry no body: an empty one with a JSON content type is accepted. */
const BODILESS_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS']);

export async function buildApi(ctx: ApiContext, options: ApiOptions) {
  const requestTimeout = options.requestTimeoutMs ?? 300_000;
  const preview = options.preview ?? { domain: 'localhost', publicUrl: undefined };
  // Node refuses a headers bound longer than the request's.
  const headersTimeout = Math.min(options.headersTimeoutMs ?? 30_000, requestTimeout);
  const app = Fastify({
    ...(options.logger ? { loggerInstance: options.logger as FastifyBaseLogger } : { logger: false }),
    bodyLimit: options.bodyLimit,
    // A request must arrive whole in time (Fastify turns Node's bound off by default: a body that
    // never came held its socket forever). Node counts only the request: once it is read, the
    // answer may take as long as it takes (SSE, a long exec); a WebSocket leaves the HTTP
    // parser when upgraded. The checks run this often, so a bound is kept to within a quarter.
    requestTimeout,
    http: {
      headersTimeout,
      connectionsCheckingInterval: Math.max(500, Math.min(30_000, Math.floor(headersTimeout / 4))),
    },
    // A path segment (an id) is at most a job id's 128 characters; longer is refused, not parsed.
    routerOptions: { maxParamLength: 256, ignoreTrailingSlash: true },
    // Requests are not logged one by one (the metrics count them); fastify 5.9's form of it.
    logController: new LogController({ disableRequestLogging: true }),
    return503OnClosing: true,
    // Errors found before routing (a bad URL, an over-long path segment) are problems too.
    frameworkErrors: (err, request, reply) => sendProblem(request, reply, err),
    // Request ids of our own; a client's x-request-id is not trusted.
    genReqId: () => crypto.randomUUID(),
    // A host-form preview (`{port}-{label}.{domain}`) is routed to the preview proxy whatever its path.
    rewriteUrl: (req) => rewritePreviewUrl(preview, req.headers.host, req.url ?? '/'),
  }).withTypeProvider<ZodTypeProvider>();
  answerBeforeBody(app.server, options.bodyLimit);
  traceRequests(app, new TraceLinks({ redis: ctx.redis, keys: ctx.keys }));
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  await app.register(problemReplies);

  // Bodies: JSON (Fastify's own parser), text and bytes for file writes, the YAML job file, tar
  // streams. A method that carries no body (DELETE, OPTIONS) sent with a JSON content type and
  // nothing after it — what many HTTP clients do — is taken as bodiless, not refused as
  // empty JSON; a POST or PUT with an empty JSON body is still refused.
  const jsonParser = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body === '' && BODILESS_METHODS.has(request.method)) {
      done(null, undefined);
      return;
    }
    jsonParser(request, body as string, done);
  });
  app.addContentTypeParser('application/octet-stream', { parseAs: 'buffer' }, (_req, body, done) =>
    done(null, body),
  );
  app.addContentTypeParser(
    ['application/yaml', 'application/x-yaml', 'text/yaml'],
    { parseAs: 'string' },
    (_req, body, done) => {
      try {
        // Aliases bounded: a "billion laughs" document is refused, not expanded.
        done(null, parseYaml(body as string, { maxAliasCount: 100 }));
      } catch (err) {
        done(
          new HttpProblem(
            400,
            'invalid-yaml',
            `the body is not valid YAML: ${(err as Error).message.split('\n')[0]}`,
          ),
          undefined,
        );
      }
    },
  );
  // A tar is handed on as the stream it is: its size is bounded by the transfer's maxBytes.
  app.addContentTypeParser('application/x-tar', (_req, payload, done) => done(null, payload));

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Sandstream HTTP API',
        description:
          'Every SDK operation over HTTP: live sandboxes, jobs, live output (SSE), an interactive shell (WebSocket). Errors are RFC 9457 problem details.',
        version: options.version ?? '0.1.0',
      },
      components: {
        securitySchemes: {
          apiKey: { type: 'http', scheme: 'bearer', description: 'sandstream apikey create --tenant <t>' },
        },
      },
      security: [{ apiKey: [] }],
    },
    transform: jsonSchemaTransform,
    transformObject: jsonSchemaTransformObject,
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });
  await app.register(websocket, { options: { maxPayload: 1024 * 1024 } });

  // In this order: who asks (401 first), then how much they may ask, then what they may see.
  await app.register(authentication, { ctx });
  await app.register(rateLimiting, {
    ctx,
    perMinute: options.rateLimitPerMinute,
    maxOpenPerKey: options.maxOpenRequestsPerKey ?? 256,
  });
  await app.register(access, { ctx });

  // A stopping replica ends its followers' streams first: their clients resume elsewhere.
  app.addHook('preClose', async () => endFollowers(app.server));

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  await app.register(authRoutes(ctx), { prefix: '/v1/auth' });
  await app.register(sandboxRoutes(ctx, ['sandboxes']), { prefix: '/v1/sandboxes' });
  await app.register(sandboxFileRoutes(ctx), { prefix: '/v1/sandboxes' });
  await app.register(sandboxProcessRoutes(ctx), { prefix: '/v1/sandboxes' });
  await app.register(sandboxShellRoutes(ctx), { prefix: '/v1/sandboxes' });
  await app.register(sandboxPortRoutes(ctx, preview), { prefix: '/v1/sandboxes' });
  await app.register(previewProxy(ctx, preview));
  await app.register(jobRoutes(ctx), { prefix: '/v1/jobs' });
  await app.register(volumeRoutes(ctx), { prefix: '/v1/volumes' });
  await app.register(snapshotRoutes(ctx), { prefix: '/v1/snapshots' });
  await app.register(catalogRoutes(ctx), { prefix: '/v1' });
  await app.register(listEventRoutes(ctx), { prefix: '/v1' });
  await app.register(seedAliasRoutes(ctx), { prefix: '/api/sandbox' });
  await app.register(adminQueueRoutes(ctx));
  const mcpSessions = new McpSessions({
    idleMs: options.mcpSessionIdleMs ?? 30 * 60_000,
    maxSessions: options.mcpMaxSessions ?? 1000,
    maxSessionsPerKey: options.mcpMaxSessionsPerKey ?? 64,
    version: options.version,
    logger: options.logger,
  });
  app.addHook('preClose', async () => mcpSessions.closeAll());
  await app.register(mcpRoutes(ctx, preview, mcpSessions));
  await app.register(e2bRoutes(ctx, preview));
  await app.register(async (scope) => consoleFiles(scope, options.consoleDir ?? DEFAULT_CONSOLE_DIR));
  return app;
}
