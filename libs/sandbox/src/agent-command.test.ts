import { describe, expect, it } from 'vitest';
import { agentArgs, agentEnvironment } from './agent-command.js';

const launch = (redisUrl: string) => ({
  jobId: 'job-1',
  workdir: '/work',
  agent: { redisUrl, keyStyle: 'tagged' as const, notifyStream: 'n', heartbeatIntervalMs: 500 },
});

describe('agent command line', () => {
  it('passes every setting as a flag and as the agent environment', () => {
    expect(agentArgs(launch('redis://127.0.0.1:6379'))).toEqual([
      '--redis-url',
      'redis://127.0.0.1:6379',
      '--job-id',
      'job-1',
      '--key-style',
      'tagged',
      '--workdir',
      '/work',
      '--notify-stream',
      'n',
      '--heartbeat-interval-ms',
      '500',
    ]);
    expect(agentEnvironment(launch('redis://127.0.0.1:6379'))).toMatchObject({
      REDIS_URL: 'redis://127.0.0.1:6379',
      JOB_ID: 'job-1',
      AGENT_KEY_STYLE: 'tagged',
      SANDSTREAM_JOB_ID: 'job-1',
    });
  });

  it('keeps a Redis password out of argv and passes it in the environment only', () => {
    const url = 'redis://sbx-user:s3cret@127.0.0.1:6379';
    const args = agentArgs(launch(url));
    expect(args.join(' ')).not.toContain('s3cret');
    expect(args).not.toContain('--redis-url');
    expect(agentEnvironment(launch(url)).REDIS_URL).toBe(url);
  });
});
