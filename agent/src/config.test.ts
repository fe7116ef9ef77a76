import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from './config.js';

const base = ['--redis-url', 'redis://localhost:6379', '--job-id', 'job-1'];

function errorOf(argv: string[], env: Record<string, string> = {}): string {
  try {
    parseConfig(argv, env, '/tmp');
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('expected a ConfigError');
}

describe('parseConfig', () => {
  it('leaves the log archive off unless asked, by flag or AGENT_LOG_ARCHIVE, with a high water mark below the stream cap', () => {
    expect(parseConfig(base, {}, '/w')).toMatchObject({ logArchive: false, logArchiveHighWater: 8000 });
    expect(parseConfig([...base, '--log-archive'], {}, '/w')).toMatchObject({ logArchive: true });
    expect(
      parseConfig(base, { AGENT_LOG_ARCHIVE: '1', AGENT_LOG_ARCHIVE_HIGH_WATER: '500' }, '/w'),
    ).toMatchObject({ logArchive: true, logArchiveHighWater: 500 });
    expect(parseConfig(base, { AGENT_LOG_ARCHIVE: '0' }, '/w')).toMatchObject({ logArchive: false });
  });

  it('fills the defaults the brief and seeds/000 name', () => {
    expect(parseConfig(base, {}, '/work')).toMatchObject({
      mode: 'run',
      redisUrl: 'redis://localhost:6379',
      jobId: 'job-1',
      verbose: false,
      keyStyle: 'plain',
      workdir: '/work',
      idleTimeoutSeconds: 60,
      maxIdleWaits: 5,
      heartbeatIntervalMs: 2000,
    });
  });

  it('reads every setting from the environment, and flags win over it', () => {
    const env = {
      REDIS_URL: 'rediss://agent:s3cret@redis.internal:6380/2',
      JOB_ID: 'from-env',
      AGENT_VERBOSE: 'true',
      AGENT_KEY_STYLE: 'tagged',
      AGENT_NOTIFY_STREAM: 'completions:0',
      AGENT_WORKDIR: '/srv',
      AGENT_IDLE_TIMEOUT_SECONDS: '0.5',
      AGENT_MAX_IDLE_WAITS: '7',
      AGENT_HEARTBEAT_INTERVAL_MS: '250',
    };
    expect(parseConfig([], env, '/tmp')).toMatchObject({
      redisUrl: 'rediss://agent:s3cret@redis.internal:6380/2',
      jobId: 'from-env',
      verbose: true,
      keyStyle: 'tagged',
      notifyStream: 'completions:0',
      workdir: '/srv',
      idleTimeoutSeconds: 0.5,
      maxIdleWaits: 7,
      heartbeatIntervalMs: 250,
    });
    expect(parseConfig(['--job-id', 'from-flag'], env, '/tmp')).toMatchObject({ jobId: 'from-flag' });
  });

  it('runs --inject without Redis settings', () => {
    expect(parseConfig(['--inject', '/shared'], {}, '/tmp')).toEqual({
      mode: 'inject',
      targetDir: '/shared',
      verbose: false,
    });
  });

  it.each([
    [['--nope'], /--nope/],
    [['--job-id'], /--job-id/],
    [['--redis-url', 'redis://x'], /--job-id.*required/],
    [['--job-id', 'a'], /--redis-url.*required/],
    [['--redis-url', 'http://x', '--job-id', 'a'], /--redis-url: .*redis:\/\/ or rediss:\/\//],
    [[...base.slice(0, 2), '--job-id', 'a{b}'], /--job-id: job id may contain only/],
    [[...base, '--key-style', 'fancy'], /--key-style/],
    [[...base, '--idle-timeout-seconds', 'soon'], /--idle-timeout-seconds must be a number/],
    [[...base, '--idle-timeout-seconds', '0'], /--idle-timeout-seconds must be at least 0.05/],
    [[...base, '--max-idle-waits', '1.5'], /--max-idle-waits must be a whole number/],
    [[...base, '--max-idle-waits=-1'], /--max-idle-waits must be at least 0/],
    [[...base, '--max-parallel-steps', '0'], /--max-parallel-steps must be at least 1/],
    [[...base, '--heartbeat-interval-ms', '10'], /--heartbeat-interval-ms must be at least 50/],
    [[...base, '--event-buffer-lines', '5'], /--event-buffer-lines must be at least 100/],
    [[...base, '--log-archive-high-water', '10000'], /--log-archive-high-water must be at most 9999/],
    [[...base, '--log-archive-high-water', '0'], /--log-archive-high-water must be at least 1/],
    [[...base, 'positional'], /positional/],
  ])('refuses %j naming the flag', (argv, message) => {
    expect(errorOf(argv)).toMatch(message);
  });
  /** The checks are written by hand (config-rules.ts): each refusal names its flag and its rule. */
  it.each([
    [
      { AGENT_VERBOSE: 'maybe' },
      [],
      '--verbose: --verbose must be one of 1, true, yes, on, 0, false, no, off',
    ],
    [{}, ['--key-style', 'fancy'], '--key-style: --key-style must be one of plain, tagged, got "fancy"'],
    [
      {},
      ['--notify-stream', 'x'.repeat(1025)],
      '--notify-stream: --notify-stream is at most 1024 characters',
    ],
    [{}, ['--spawner', '  '], '--spawner: --spawner must be auto, none or a path'],
    [
      {},
      ['--event-buffer-bytes', '1.5'],
      '--event-buffer-bytes: --event-buffer-bytes must be a whole number; --event-buffer-bytes: --event-buffer-bytes must be at least 65536',
    ],
    [{ AGENT_MAX_IDLE_WAITS: ' ' }, [], '--max-idle-waits: --max-idle-waits must not be empty'],
    [{}, ['--job-id', 'x'.repeat(129)], '--job-id: job id is at most 128 characters'],
  ])('words the refusal of %j %j in full', (env, argv, message) => {
    expect(errorOf([...base, ...argv], env)).toBe(message);
  });

  it('reports every broken rule at once, and reads the rest as before', () => {
    expect(errorOf(['--job-id', 'a b', '--heartbeat-interval-ms', 'soon'])).toBe(
      '--redis-url: --redis-url (or REDIS_URL) is required; --job-id: job id may contain only letters, digits, ".", "_", ":" and "-", and must start with a letter or digit; --heartbeat-interval-ms: --heartbeat-interval-ms must be a number, got "soon"',
    );
    expect(
      parseConfig(
        [...base, '--spawner', ' /opt/spawner ', '--confine-allow', '/a:rel:/b', '--redis-rate-limit', '0'],
        { AGENT_CONFINE_FILES: 'yes', AGENT_AWAIT_CLAIM: 'off' },
        '/w',
      ),
    ).toMatchObject({
      spawner: '/opt/spawner',
      confineAllow: ['/a', '/b'],
      confineFiles: true,
      awaitClaim: false,
      redisRateLimit: 0,
      notifyStreamMaxLength: 100_000,
      eventBufferLines: 10_000,
    });
    expect(parseConfig(base, {}, '/w')).toMatchObject({ confineAllow: [], spawner: 'auto' });
  });
});
