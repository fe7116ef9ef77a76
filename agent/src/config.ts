import { parseArgs } from 'node:util';
import { formatIssues, JobIdSchema, KeyStyleSchema, StreamLimits } from '@sandstream/wire';
import * as z from 'zod';
import { DEFAULT_REDIS_RATE_LIMIT } from './write-pace.js';

/**
 * Agent configuration: command-line flags, each with an environment equivalent (flags win).
 * The environment form exists because pod specs and `docker run -e` pass secrets-bearing values
 * such as a Redis URL with a password more safely as env than as visible argv.
 */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** flag name -> environment variable that can supply it. */
export const ENV_FOR_FLAG = {
  'redis-url': 'REDIS_URL',
  'job-id': 'JOB_ID',
  inject: 'AGENT_INJECT',
  verbose: 'AGENT_VERBOSE',
  'key-style': 'AGENT_KEY_STYLE',
  'notify-stream': 'AGENT_NOTIFY_STREAM',
  'notify-stream-max-length': 'AGENT_NOTIFY_STREAM_MAX_LENGTH',
  workdir: 'AGENT_WORKDIR',
  'idle-timeout-seconds': 'AGENT_IDLE_TIMEOUT_SECONDS',
  'max-idle-waits': 'AGENT_MAX_IDLE_WAITS',
  'max-parallel-steps': 'AGENT_MAX_PARALLEL_STEPS',
  'heartbeat-interval-ms': 'AGENT_HEARTBEAT_INTERVAL_MS',
  'auth-retry-seconds': 'AGENT_AUTH_RETRY_SECONDS',
  'event-buffer-lines': 'AGENT_EVENT_BUFFER_LINES',
  'event-buffer-bytes': 'AGENT_EVENT_BUFFER_BYTES',
  spawner: 'AGENT_SPAWNER',
  'log-archive': 'AGENT_LOG_ARCHIVE',
  'log-archive-high-water': 'AGENT_LOG_ARCHIVE_HIGH_WATER',
  'confine-files': 'AGENT_CONFINE_FILES',
  'confine-allow': 'AGENT_CONFINE_ALLOW',
  'await-claim': 'AGENT_AWAIT_CLAIM',
  'redis-rate-limit': 'AGENT_REDIS_RATE_LIMIT',
} as const;
type Flag = keyof typeof ENV_FOR_FLAG;

const numberFrom = (flag: string) =>
  z
    .string()
    .trim()
    .min(1, `--${flag} must not be empty`)
    .transform((s, ctx) => {
      const n = Number(s);
      if (!Number.isFinite(n)) {
        ctx.addIssue({ code: 'custom', message: `--${flag} must be a number, got "${s}"` });
        return z.NEVER;
      }
      return n;
    });

const intFlag = (flag: string, min: number, max: number) =>
  numberFrom(flag).pipe(
    z
      .number()
      .int(`--${flag} must be a whole number`)
      .min(min, `--${flag} must be at least ${min}`)
      .max(max, `--${flag} must be at most ${max}`),
  );

const booleanFlag = z
  .union([z.boolean(), z.enum(['1', 'true', 'yes', 'on', '0', 'false', 'no', 'off', ''])])
  .transform((v) => v === true || v === '1' || v === 'true' || v === 'yes' || v === 'on');

/**
 * Output buffer bounds: enough to ride out a burst while Redis catches up, small enough that a
 * chatty step leaves the agent's peak RSS near the 80 MB goal. Halving both (5,000 lines /
 * 1 MiB) measured ~3 MB less peak RSS but ~20 % less delivered throughput in back-to-back
 * runs, so the default stays; a sandbox short of memory can set it lower (docs/benchmarks.md).
 */
export const DEFAULT_EVENT_BUFFER_LINES = 10_000;
/**
 * Default of --max-parallel-steps: enough for an agent's parallel tool calls, while output
 * memory stays bounded at 16 per-step event buffers.
 */
export const DEFAULT_MAX_PARALLEL_STEPS = 16;
export const DEFAULT_EVENT_BUFFER_BYTES = 2 * 1024 * 1024;
/**
 * Default of --log-archive-high-water: entries the events stream holds (plus lines in flight)
 * before a step is slowed down. Below the stream's MAXLEN ~ 10,000 with room to spare, so the
 * cap never trims what the archiver has not read; well above the archiver's batches (~500).
 */
export const DEFAULT_LOG_ARCHIVE_HIGH_WATER = 8000;
/** The shared completion stream is capped like every other stream (MAXLEN ~). */
export const DEFAULT_NOTIFY_STREAM_MAX_LENGTH = 100_000;

const RunConfigSchema = z.object({
  redisUrl: z
    .string({ error: '--redis-url (or REDIS_URL) is required' })
    .regex(/^rediss?:\/\/[^\s]+$/, '--redis-url must be a redis:// or rediss:// URL'),
  jobId: z.string({ error: '--job-id (or JOB_ID) is required' }).pipe(JobIdSchema),
  verbose: booleanFlag.default(false),
  keyStyle: KeyStyleSchema.default('plain'),
  notifyStream: z
    .string()
    .min(1, '--notify-stream must not be empty')
    .max(1024, '--notify-stream is at most 1024 characters')
    .optional(),
  notifyStreamMaxLength: intFlag('notify-stream-max-length', 1, 100_000_000).default(
    DEFAULT_NOTIFY_STREAM_MAX_LENGTH,
  ),
  workdir: z.string().min(1, '--workdir must not be empty'),
  idleTimeoutSeconds: numberFrom('idle-timeout-seconds')
    .pipe(
      z
        .number()
        .min(0.05, '--idle-timeout-seconds must be at least 0.05')
        .max(86_400, '--idle-timeout-seconds must be at most 86400'),
    )
    .default(60),
  /**
   * Empty pops in a row before the agent exits 2. 0: never leave on idleness — a live sandbox's
   * agent waits for its client's next command however long it thinks, and the services end it
   * (close, idle expiry, lifetime).
   */
  maxIdleWaits: intFlag('max-idle-waits', 0, 1_000_000).default(5),
  /** Steps marked parallel that may run at once (agent-loop.ts). */
  maxParallelSteps: intFlag('max-parallel-steps', 1, 1024).default(DEFAULT_MAX_PARALLEL_STEPS),
  heartbeatIntervalMs: intFlag('heartbeat-interval-ms', 50, 3_600_000).default(2000),
  /**
   * How long Redis may refuse the sandbox's credentials (WRONGPASS/NOAUTH) before the agent gives
   * up with exit 3. After a Redis restart the sandbox users are re-created within seconds
   * (pod-lifecycle); two minutes leave room for a slow service without keeping a sandbox whose
   * user is gone for good.
   */
  authRetrySeconds: intFlag('auth-retry-seconds', 1, 86_400).default(120),
  eventBufferLines: intFlag('event-buffer-lines', 100, 10_000_000).default(DEFAULT_EVENT_BUFFER_LINES),
  eventBufferBytes: intFlag('event-buffer-bytes', 64 * 1024, 1024 * 1024 * 1024).default(
    DEFAULT_EVENT_BUFFER_BYTES,
  ),
  /**
   * Who starts run steps' processes: `auto` finds the native sandstream-spawner shipped in the
   * runtime's lib directory (and falls back to Node's child_process without it), `none` always
   * uses child_process, a path names the helper.
   */
  spawner: z.string().trim().min(1, '--spawner must be auto, none or a path').default('auto'),
  /**
   * The log archive reads this job's events stream (pod-lifecycle sets AGENT_LOG_ARCHIVE=1 when
   * the installation has one): slow a step down instead of dropping its lines. Off (and for a
   * standalone agent) lines beyond the buffer are dropped and counted.
   */
  logArchive: booleanFlag.default(false),
  logArchiveHighWater: intFlag('log-archive-high-water', 1, StreamLimits.eventStreamMaxLength - 1).default(
    DEFAULT_LOG_ARCHIVE_HIGH_WATER,
  ),
  /**
   * File steps stay inside --workdir (an absolute path resolves inside it, `..` stops at it, a
   * link out is refused): the in-process backend sets it, since there no container is the boundary.
   */
  confineFiles: booleanFlag.default(false),
  /**
   * Confined only: directories outside --workdir a link inside it may lead to (`:`-separated
   * absolute paths): the in-process backend's volumes, linked in at their mount paths.
   */
  confineAllow: z
    .string()
    .optional()
    .transform((value) => (value ? value.split(':').filter((p) => p.startsWith('/')) : [])),
  /**
   * A warm pool member: --job-id is the member's id; the agent boots, waits on its claim key for
   * the job it will serve, takes on that job's identity and only then runs steps (await-claim.ts).
   */
  awaitClaim: booleanFlag.default(false),
  /**
   * The sandbox's Redis rate limit, commands per second (pod-lifecycle passes the step-dispatcher's
   * SANDBOX_REDIS_RATE_LIMIT): output is written at half of it, lines packed into fewer stream
   * entries when a step prints faster (write-pace.ts). 0: unpaced. Absent: the services' default.
   */
  redisRateLimit: intFlag('redis-rate-limit', 0, 10_000_000).default(DEFAULT_REDIS_RATE_LIMIT),
});
export type RunConfig = z.output<typeof RunConfigSchema>;

export type AgentCommand =
  | { mode: 'inject'; targetDir: string; verbose: boolean }
  | ({ mode: 'run' } & RunConfig);

const FLAG_KEYS: Record<Flag, keyof z.input<typeof RunConfigSchema> | 'inject'> = {
  'redis-url': 'redisUrl',
  'job-id': 'jobId',
  inject: 'inject',
  verbose: 'verbose',
  'key-style': 'keyStyle',
  'notify-stream': 'notifyStream',
  'notify-stream-max-length': 'notifyStreamMaxLength',
  workdir: 'workdir',
  'idle-timeout-seconds': 'idleTimeoutSeconds',
  'max-idle-waits': 'maxIdleWaits',
  'max-parallel-steps': 'maxParallelSteps',
  'heartbeat-interval-ms': 'heartbeatIntervalMs',
  'auth-retry-seconds': 'authRetrySeconds',
  'event-buffer-lines': 'eventBufferLines',
  'event-buffer-bytes': 'eventBufferBytes',
  spawner: 'spawner',
  'log-archive': 'logArchive',
  'log-archive-high-water': 'logArchiveHighWater',
  'confine-files': 'confineFiles',
  'confine-allow': 'confineAllow',
  'await-claim': 'awaitClaim',
  'redis-rate-limit': 'redisRateLimit',
};

/**
 * Parses argv (without node and script) and the environment. Throws ConfigError with a message
 * that names the offending flag; never exits by itself, so it can be tested in-process.
 */
export function parseConfig(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  cwd: string,
): AgentCommand {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        'redis-url': { type: 'string' },
        'job-id': { type: 'string' },
        inject: { type: 'string' },
        verbose: { type: 'boolean' },
        'key-style': { type: 'string' },
        'notify-stream': { type: 'string' },
        'notify-stream-max-length': { type: 'string' },
        workdir: { type: 'string' },
        'idle-timeout-seconds': { type: 'string' },
        'max-idle-waits': { type: 'string' },
        'max-parallel-steps': { type: 'string' },
        'heartbeat-interval-ms': { type: 'string' },
        'auth-retry-seconds': { type: 'string' },
        'event-buffer-lines': { type: 'string' },
        'event-buffer-bytes': { type: 'string' },
        spawner: { type: 'string' },
        'log-archive': { type: 'boolean' },
        'log-archive-high-water': { type: 'string' },
        'confine-files': { type: 'boolean' },
        'confine-allow': { type: 'string' },
        'await-claim': { type: 'boolean' },
        'redis-rate-limit': { type: 'string' },
      },
    }));
  } catch (err) {
    // parseArgs already names the flag ("Unknown option '--x'", "Option '--job-id <value>' argument missing").
    throw new ConfigError((err as Error).message);
  }

  const raw: Record<string, string | boolean | undefined> = {};
  for (const [flag, key] of Object.entries(FLAG_KEYS) as [Flag, string][]) {
    const fromFlag = values[flag];
    const fromEnv = env[ENV_FOR_FLAG[flag]];
    raw[key] =
      fromFlag !== undefined ? fromFlag : fromEnv !== undefined && fromEnv !== '' ? fromEnv : undefined;
  }

  const verbose = booleanFlag.safeParse(raw.verbose ?? false);
  if (typeof raw.inject === 'string') {
    if (raw.inject.trim() === '') throw new ConfigError('--inject needs a target directory');
    return { mode: 'inject', targetDir: raw.inject, verbose: verbose.success ? verbose.data : false };
  }
  delete raw.inject;
  raw.workdir ??= cwd;

  const parsed = RunConfigSchema.safeParse(raw);
  if (!parsed.success)
    throw new ConfigError(formatIssues(parsed.error).replaceAll(/(^|; )(\w+): /g, flagPrefix));
  return { mode: 'run', ...parsed.data };
}

/** zod names fields by their config key; operators know them by flag, so say `--job-id: ...`. */
function flagPrefix(_m: string, sep: string, key: string): string {
  const flag = (Object.entries(FLAG_KEYS) as [Flag, string][]).find(([, k]) => k === key)?.[0];
  return flag ? `${sep}--${flag}: ` : `${sep}${key}: `;
}
