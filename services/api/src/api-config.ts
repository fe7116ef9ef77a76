import { intVar, portVar, SharedEnv, serviceEnvSchema } from '@sandstream/service-kit';

import { z } from 'zod';

/** The HTTP API's environment (services/api). */
export const ApiEnvSchema = serviceEnvSchema(8086).extend({
  SANDSTREAM_INSTALLATION: SharedEnv.SANDSTREAM_INSTALLATION,
  /** The API's own port; `npm start` gives further replicas free ports of their own. */
  API_PORT: portVar(8080),
  /**
   * Loopback by default, as HEALTH_HOST and for the same reason (a sandbox on a Docker bridge
   * reaches the host's other addresses); containers and pods set 0.0.0.0.
   */
  API_HOST: z.string().trim().min(1, 'API_HOST must name an address').default('127.0.0.1'),
  /**
   * `loopback`: a request from this machine without a key acts as tenant `default` (the quick
   * start sets it); `off` (the default, and the deployed manifests): every request needs a key.
   */
  API_ANONYMOUS: z
    .enum(['loopback', 'off'], { error: 'API_ANONYMOUS must be loopback or off' })
    .default('off'),
  /**
   * A key (`sk_<id>_<secret>`) registered at start as an admin key of tenant `default` when its id
   * is not yet known: how a deployment's secret becomes its first admin key (deploy/k8s overlays).
   */
  API_ADMIN_KEY: z
    .string()
    .trim()
    .transform((v) => (v === '' ? undefined : v))
    .pipe(
      z
        .string()
        .regex(
          /^sk_[a-f0-9]{16}_[A-Za-z0-9_-]{43}$/,
          'API_ADMIN_KEY must look like sk_<16 hex>_<43 base64url>',
        )
        .optional(),
    )
    .optional(),
  /** The web console's built files, served at / (default: the repo's console/dist). */
  API_CONSOLE_DIR: z.string().min(1).max(4096).optional(),
  /** What a sandbox created with neither image nor template gets: a template by name … */
  API_DEFAULT_TEMPLATE: z.string().min(1).max(253).optional(),
  /** … else this image (the quick start's local Debian image). */
  API_DEFAULT_IMAGE: z.string().min(1).max(1024).default('sandstream/debian:bookworm'),
  /**
   * How often (ms) a create or resume waiting for readiness reads the record when nothing woke it
   * (the SDK's readyRecheckMs): the safety net for a lost wake-up, not how the wait ends.
   */
  API_READY_RECHECK_MS: intVar(10, 3_600_000, 1000),
  /** The largest request body read into memory (JSON, YAML, a file written with PUT). */
  API_BODY_LIMIT_BYTES: intVar(1024, 64 * 1024 * 1024, 16 * 1024 * 1024),
  /** Requests per minute per key (per address without one), counted in Redis across replicas. */
  API_RATE_LIMIT_PER_MINUTE: intVar(1, 1_000_000, 1200),
  /**
   * How long a client may take to send a request's headers (at most the request's bound), and
   * its whole request (headers and body): a request whose body never arrives is answered 408 and
   * its connection closed then. Only the request is bounded: a long answer (an exec's SSE, a
   * follow, a WebSocket shell, a JSON exec of a long command) is not. A tar upload must arrive
   * within the request bound.
   */
  API_HEADERS_TIMEOUT_MS: intVar(1000, 600_000, 30_000),
  API_REQUEST_TIMEOUT_MS: intVar(1000, 3_600_000, 300_000),
  /**
   * Requests one key (one address without a key) may have open at once on a replica, long
   * streams included: past it 429, so that one key cannot hold a replica's sockets.
   */
  API_MAX_OPEN_REQUESTS_PER_KEY: intVar(1, 100_000, 256),
  /** An MCP session (/mcp) with no request open for this long ends and closes the sandboxes it created. */
  API_MCP_SESSION_IDLE_SECONDS: intVar(1, 7 * 24 * 3600, 1800),
  /**
   * MCP sessions one replica holds at once (each an MCP server in its memory until it ends), and
   * one key's share of them: past either, an initialize is answered 429 naming the limit.
   */
  API_MCP_MAX_SESSIONS: intVar(1, 100_000, 1000),
  API_MCP_MAX_SESSIONS_PER_KEY: intVar(1, 100_000, 64),
  /** Host-form preview URLs live under `{port}-{label}.<this>` (*.localhost resolves to loopback). */
  SANDSTREAM_PREVIEW_DOMAIN: z
    .string()
    .regex(
      /^[a-z0-9.-]{1,200}$/,
      'SANDSTREAM_PREVIEW_DOMAIN must be a DNS name (lowercase letters, digits, ., -)',
    )
    .default('localhost'),
  /** The API as a preview URL's user reaches it (default: the request's own scheme and Host). */
  API_PUBLIC_URL: z
    .string()
    .regex(/^https?:\/\/[^/]+$/, 'API_PUBLIC_URL must be http(s)://host[:port] with no path')
    .optional(),
  /** How the preview proxy relays body-less GETs (preview-config.ts): `passthrough` or `reply-from`. */
  API_PREVIEW_FORWARD: z.enum(['passthrough', 'reply-from']).default('passthrough'),
  /** The templates file the scheduler reads, for GET /v1/templates and /v1/pools. */
  SANDSTREAM_TEMPLATES_FILE: z.string().min(1).optional(),
});
export type ApiEnv = z.output<typeof ApiEnvSchema>;
