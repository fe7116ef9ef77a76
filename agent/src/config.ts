import { parseArgs } from 'node:util';
import { jobIdProblems, KEY_STYLES, type KeyStyle, StreamLimits } from '@sandstream/wire/lean';
import { Problems, type Raw, readBoolean, readInt, readNumberIn, readString } from './config-rules.js';
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
  'memory-release-delay-ms': 'AGENT_MEMORY_RELEASE_DELAY_MS',
} as const;
type Flag = keyof typeof ENV_FOR_FLAG;

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
 * Default of --memory-release-delay-ms: longer than a one-step job's agent usually lives (its
 * shutdown step follows its one result), well inside the 3 s after which the idle-memory bench
 * reads an idle agent.
 */
export const DEFAULT_MEMORY_RELEASE_DELAY_MS = 1000;
/**
 * Default of --log-archive-high-water: entries the events stream holds (plus lines in flight)
 * before a step is slowed down. Below the stream's MAXLEN ~ 10,000 with room to spare, so the
 * cap never trims what the archiver has not read; well above the archiver's batches (~500).
 */
export const DEFAULT_LOG_ARCHIVE_HIGH_WATER = 8000;
/** The shared completion stream is capped like every other stream (MAXLEN ~). */
export const DEFAULT_NOTIFY_STREAM_MAX_LENGTH = 100_000;

/** The agent's configuration once parsed: defaults filled (parseConfig). */
export interface RunConfig {
  redisUrl: string;
  jobId: string;
  verbose: boolean;
  keyStyle: KeyStyle;
  notifyStream?: string | undefined;
  notifyStreamMaxLength: number;
  workdir: string;
  idleTimeoutSeconds: number;
  /**
   * Empty pops in a row before the agent exits 2. 0: never leave on idleness — a live sandbox's
   * agent waits for its client's next command however long it thinks, and the services end it
   * (close, idle expiry, lifetime).
   */
  maxIdleWaits: number;
  /** Steps marked parallel that may run at once (agent-loop.ts). */
  maxParallelSteps: number;
  heartbeatIntervalMs: number;
  /**
   * How long Redis may refuse the sandbox's credentials (WRONGPASS/NOAUTH) before the agent gives
   * up with exit 3. After a Redis restart the sandbox users are re-created within seconds
   * (pod-lifecycle); two minutes leave room for a slow service without keeping a sandbox whose
   * user is gone for good.
   */
  authRetrySeconds: number;
  eventBufferLines: number;
  eventBufferBytes: number;
  /**
   * Who starts run steps' processes: `auto` finds the native sandstream-spawner shipped in the
   * runtime's lib directory (and falls back to Node's child_process without it), `none` always
   * uses child_process, a path names the helper.
   */
  spawner: string;
  /**
   * The log archive reads this job's events stream (pod-lifecycle sets AGENT_LOG_ARCHIVE=1 when
   * the installation has one): slow a step down instead of dropping its lines. Off (and for a
   * standalone agent) lines beyond the buffer are dropped and counted.
   */
  logArchive: boolean;
  logArchiveHighWater: number;
  /**
   * File steps stay inside --workdir (an absolute path resolves inside it, `..` stops at it, a
   * link out is refused): the in-process backend sets it, since there no container is the boundary.
   */
  confineFiles: boolean;
  /**
   * Confined only: directories outside --workdir a link inside it may lead to (`:`-separated
   * absolute paths): the in-process backend's volumes, linked in at their mount paths.
   */
  confineAllow: string[];
  /**
   * A warm pool member: --job-id is the member's id; the agent boots, waits on its claim key for
   * the job it will serve, takes on that job's identity and only then runs steps (await-claim.ts).
   */
  awaitClaim: boolean;
  /**
   * The sandbox's Redis rate limit, commands per second (pod-lifecycle passes the step-dispatcher's
   * SANDBOX_REDIS_RATE_LIMIT): output is written at half of it, lines packed into fewer stream
   * entries when a step prints faster (write-pace.ts). 0: unpaced. Absent: the services' default.
   */
  redisRateLimit: number;
  /**
   * How long after its first heartbeat the agent gives back the memory only its start needed
   * (release-startup-blob.ts: the startup blob's pages, the bundle's source, then one full GC).
   * That costs ~8 % of a short job's agent CPU (docs/benchmarks.md), wasted on an agent that is gone within a second;
   * an agent that lives on (a live sandbox, a long job) pays it once, after this delay.
   */
  memoryReleaseDelayMs: number;
}

/** Every value of the run configuration checked, each refusal naming its flag (config-rules.ts). */
function readRunConfig(raw: Readonly<Record<string, Raw>>, problems: Problems): RunConfig {
  const p = problems;
  let redisUrl = '';
  if (raw.redisUrl === undefined) p.add('redis-url', '--redis-url (or REDIS_URL) is required');
  else if (!/^rediss?:\/\/[^\s]+$/.test(String(raw.redisUrl)))
    p.add('redis-url', '--redis-url must be a redis:// or rediss:// URL');
  else redisUrl = String(raw.redisUrl);
  let jobId = '';
  if (raw.jobId === undefined) p.add('job-id', '--job-id (or JOB_ID) is required');
  else {
    jobId = String(raw.jobId);
    for (const problem of jobIdProblems(jobId)) p.add('job-id', problem);
  }
  let keyStyle: KeyStyle = 'plain';
  if (raw.keyStyle !== undefined) {
    if (KEY_STYLES.includes(raw.keyStyle as KeyStyle)) keyStyle = raw.keyStyle as KeyStyle;
    else
      p.add(
        'key-style',
        `--key-style must be one of ${KEY_STYLES.join(', ')}, got "${String(raw.keyStyle)}"`,
      );
  }
  const spawner = raw.spawner === undefined ? 'auto' : String(raw.spawner).trim();
  if (spawner === '') p.add('spawner', '--spawner must be auto, none or a path');
  const confineAllow = raw.confineAllow ? String(raw.confineAllow) : '';
  return {
    redisUrl,
    jobId,
    verbose: readBoolean(raw.verbose, 'verbose', p),
    keyStyle,
    notifyStream: readString(raw.notifyStream, 'notify-stream', 1024, p),
    notifyStreamMaxLength: readInt(
      raw.notifyStreamMaxLength,
      'notify-stream-max-length',
      1,
      100_000_000,
      DEFAULT_NOTIFY_STREAM_MAX_LENGTH,
      p,
    ),
    workdir: readString(raw.workdir, 'workdir', Number.POSITIVE_INFINITY, p) ?? '',
    idleTimeoutSeconds: readNumberIn(
      raw.idleTimeoutSeconds,
      'idle-timeout-seconds',
      { min: 0.05, max: 86_400 },
      60,
      p,
    ),
    maxIdleWaits: readInt(raw.maxIdleWaits, 'max-idle-waits', 0, 1_000_000, 5, p),
    maxParallelSteps: readInt(
      raw.maxParallelSteps,
      'max-parallel-steps',
      1,
      1024,
      DEFAULT_MAX_PARALLEL_STEPS,
      p,
    ),
    heartbeatIntervalMs: readInt(raw.heartbeatIntervalMs, 'heartbeat-interval-ms', 50, 3_600_000, 2000, p),
    memoryReleaseDelayMs: readInt(
      raw.memoryReleaseDelayMs,
      'memory-release-delay-ms',
      0,
      3_600_000,
      DEFAULT_MEMORY_RELEASE_DELAY_MS,
      p,
    ),
    authRetrySeconds: readInt(raw.authRetrySeconds, 'auth-retry-seconds', 1, 86_400, 120, p),
    eventBufferLines: readInt(
      raw.eventBufferLines,
      'event-buffer-lines',
      100,
      10_000_000,
      DEFAULT_EVENT_BUFFER_LINES,
      p,
    ),
    eventBufferBytes: readInt(
      raw.eventBufferBytes,
      'event-buffer-bytes',
      64 * 1024,
      1024 * 1024 * 1024,
      DEFAULT_EVENT_BUFFER_BYTES,
      p,
    ),
    spawner,
    logArchive: readBoolean(raw.logArchive, 'log-archive', p),
    logArchiveHighWater: readInt(
      raw.logArchiveHighWater,
      'log-archive-high-water',
      1,
      StreamLimits.eventStreamMaxLength - 1,
      DEFAULT_LOG_ARCHIVE_HIGH_WATER,
      p,
    ),
    confineFiles: readBoolean(raw.confineFiles, 'confine-files', p),
    confineAllow: confineAllow ? confineAllow.split(':').filter((path) => path.startsWith('/')) : [],
    awaitClaim: readBoolean(raw.awaitClaim, 'await-claim', p),
    redisRateLimit: readInt(
      raw.redisRateLimit,
      'redis-rate-limit',
      0,
      10_000_000,
      DEFAULT_REDIS_RATE_LIMIT,
      p,
    ),
  };
}

export type AgentCommand =
  | { mode: 'inject'; targetDir: string; verbose: boolean }
  | ({ mode: 'run' } & RunConfig);

const FLAG_KEYS: Record<Flag, keyof RunConfig | 'inject'> = {
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
  'memory-release-delay-ms': 'memoryReleaseDelayMs',
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
        'memory-release-delay-ms': { type: 'string' },
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

  if (typeof raw.inject === 'string') {
    if (raw.inject.trim() === '') throw new ConfigError('--inject needs a target directory');
    return {
      mode: 'inject',
      targetDir: raw.inject,
      verbose: readBoolean(raw.verbose, 'verbose', new Problems()),
    };
  }
  delete raw.inject;
  raw.workdir ??= cwd;

  const problems = new Problems();
  const config = readRunConfig(raw, problems);
  if (problems.list.length > 0) throw new ConfigError(problems.list.join('; '));
  return { mode: 'run', ...config };
}
