import { JobStateSchema, type RedisClient } from '@sandstream/bus';
import { formatIssues, strictObject } from '@sandstream/wire';
import { z } from 'zod';
import { FOLLOW_CURSOR_PATTERN } from './follow-cursor.js';

/**
 * The SDK's option objects as strict zod schemas: a misspelt or renamed key (`prefix` for
 * `namespace`) is refused with its name instead of being ignored, which once let a client talk to
 * the default namespace while its caller waited on another. They are built with libs/wire's
 * strictObject and worded by its formatIssues, so an unknown key gets the same "did you mean"
 * as at every other edge.
 */

/** What `onWarning` receives: something the caller should know, that is not an error. */
export const SandstreamWarningSchema = z.object({
  /** `no-scheduler`: nothing consumes the namespace's jobs queue, so a submitted job stays queued. */
  code: z.enum(['no-scheduler']),
  message: z.string(),
  namespace: z.string(),
});
export type SandstreamWarning = z.infer<typeof SandstreamWarningSchema>;

const fn = <T>(what: string) =>
  z.custom<T>((v) => typeof v === 'function', { message: `${what} must be a function` });

export const SandstreamClientOptionsSchema = strictObject(
  {
    /** An ioredis client (or Cluster) to use; the client does not close it. */
    redis: z
      // Duck-typed, not instanceof: the caller's ioredis may be another copy of the package.
      .custom<RedisClient>(
        (v) => typeof v === 'object' && v !== null && typeof (v as RedisClient).duplicate === 'function',
        { message: 'redis must be an ioredis Redis or Cluster client' },
      )
      .optional(),
    /** Used when `redis` is not given (default redis://127.0.0.1:6379). */
    redisUrl: z
      .string()
      .regex(/^rediss?:\/\//, 'redisUrl must start with redis:// or rediss://')
      .optional(),
    /**
     * The HTTP API (services/api) to talk to instead of Redis, e.g. https://sandstream.example:8080
     * (from outside the cluster). Not with redis, redisUrl or namespace: the API has its own.
     */
    url: z
      .string()
      .regex(/^https?:\/\/[^/]/, 'url must start with http:// or https://')
      .max(2048)
      .optional(),
    /** The API key sent as a bearer token (with url); none: the API's anonymous access, if on. */
    apiKey: z.string().min(1).max(512).optional(),
    /**
     * Over Redis: the HTTP API as a preview URL's user reaches it (sandbox.ports.url points there,
     * the API being the one proxy); default SANDSTREAM_API_URL. Over HTTP the API answers it.
     */
    previewUrl: z
      .string()
      .regex(/^https?:\/\/[^/]/, 'previewUrl must start with http:// or https://')
      .max(2048)
      .optional(),
    /** Over Redis: the host-form domain (`{port}-{label}.{domain}`); default SANDSTREAM_PREVIEW_DOMAIN, else localhost. */
    previewDomain: z
      .string()
      .regex(/^[a-z0-9.-]{1,200}$/, 'previewDomain must be a DNS name (lowercase letters, digits, ., -)')
      .optional(),
    /** The deployment's namespace (KeySpace); must match the services' SANDSTREAM_NAMESPACE. */
    namespace: z.string().min(1).optional(),
    /**
     * Over Redis: the image of the helper sandbox `volumes.files(name)` runs in (any image; the
     * agent does the file work). Default sandstream/debian:bookworm (a local image). Over HTTP the API's default image.
     */
    volumeHelperImage: z.string().min(1).max(1024).optional(),
    /**
     * Over Redis: how often (ms) a wait for readiness (create, connect, resume) reads the record
     * when nothing woke it. The wait is woken by the sandbox's events stream; this is only the
     * safety net for a lost wake-up (a Redis restart). Default 1000. Over HTTP the API's own.
     */
    readyRecheckMs: z
      .number()
      .int('readyRecheckMs must be a whole number of milliseconds')
      .min(10, 'readyRecheckMs must be at least 10')
      .max(3_600_000, 'readyRecheckMs must be at most 3600000 (an hour)')
      .optional(),
    /**
     * Called with each warning (e.g. a submit to a namespace no scheduler serves). Default:
     * process.emitWarning, so a caller who never looks still sees it on stderr.
     */
    onWarning: fn<(warning: SandstreamWarning) => void>('onWarning').optional(),
  },
  {
    // The option's name before it matched the CLI's --namespace and the services' variable.
    prefix: 'did you mean "namespace"? the option was renamed',
    // Cancel is a request the step-dispatcher carries out: the SDK no longer knows the shards.
    completionShards: 'the SDK no longer needs it: a cancel is a request the step-dispatcher carries out',
  },
);
export type SandstreamClientOptions = z.input<typeof SandstreamClientOptionsSchema>;

const signal = z.instanceof(AbortSignal, { message: 'signal must be an AbortSignal' }).optional();

export const FollowOptionsSchema = strictObject({
  /** Resume after this cursor (a FollowItem's cursor); default: the start of the stream. */
  from: z
    .string()
    .regex(FOLLOW_CURSOR_PATTERN, 'from must be a follow cursor such as 1700000000000-0 or 1700000000000-0:2')
    .optional(),
  signal,
  /** Yield state changes only (what wait() needs). */
  statesOnly: z.boolean().optional(),
  /**
   * Stop at the end of what the job's stream holds now instead of following it to the terminal
   * state: what `sandstream logs` without -f prints of a running job.
   */
  untilNow: z.boolean().optional(),
  /**
   * Give up when Redis stays unreachable this long, rethrowing the connection error. Default:
   * wait it out however long it lasts (services and SDK users ride through outages; a CLI
   * with a person waiting in front of it sets a bound).
   */
  outageLimitMs: z.number().positive().optional(),
});
export type FollowOptions = z.input<typeof FollowOptionsSchema>;

export const WaitOptionsSchema = strictObject({
  timeoutMs: z.number().positive().optional(),
  signal,
});
export type WaitOptions = z.input<typeof WaitOptionsSchema>;

export const ListOptionsSchema = strictObject({
  tenant: z.string().min(1).optional(),
  state: JobStateSchema.optional(),
  /** Newest first; at most this many (default 100, max 1000). */
  limit: z.number().int().min(1).max(1000).optional(),
});
export type ListOptions = z.input<typeof ListOptionsSchema>;

export class SandstreamOptionsError extends TypeError {
  override readonly name = 'SandstreamOptionsError';
}

/** Parses `value` (undefined counts as `{}`), or throws naming `what` and every broken rule. */
export function parseOptions<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  const parsed = schema.safeParse(value ?? {});
  if (parsed.success) return parsed.data;
  throw new SandstreamOptionsError(`${what}: ${formatIssues(parsed.error)}`);
}
