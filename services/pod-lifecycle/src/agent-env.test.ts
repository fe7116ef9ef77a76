import { describe, expect, it } from 'vitest';
import { agentEnvFor } from './agent-env.js';
import { PodLifecycleEnvSchema } from './pod-lifecycle-config.js';

const parse = (env: Record<string, string>) =>
  PodLifecycleEnvSchema.parse({ REDIS_URL: 'redis://127.0.0.1:6379', ...env });

describe("the agent's environment from pod-lifecycle's", () => {
  const rate = { AGENT_REDIS_RATE_LIMIT: '30000' };

  it('turns the log archive on for agents when NATS_URL is set, unless LOG_ARCHIVE=off', () => {
    expect(agentEnvFor(parse({}))).toEqual(rate);
    expect(agentEnvFor(parse({ NATS_URL: 'nats://nats:4222' }))).toEqual({ ...rate, AGENT_LOG_ARCHIVE: '1' });
    expect(agentEnvFor(parse({ NATS_URL: 'nats://nats:4222', LOG_ARCHIVE: 'on' }))).toEqual({
      ...rate,
      AGENT_LOG_ARCHIVE: '1',
    });
    expect(agentEnvFor(parse({ NATS_URL: 'nats://nats:4222', LOG_ARCHIVE: 'off' }))).toEqual(rate);
    // LOG_ARCHIVE=on without a NATS to archive into: nobody would trim the stream.
    expect(agentEnvFor(parse({ LOG_ARCHIVE: 'on' }))).toEqual(rate);
  });

  it("tells every agent its sandbox's Redis rate limit (the step-dispatcher's), so that it paces its output", () => {
    expect(agentEnvFor(parse({ SANDBOX_REDIS_RATE_LIMIT: '5000' }))).toEqual({
      AGENT_REDIS_RATE_LIMIT: '5000',
    });
    expect(agentEnvFor(parse({ SANDBOX_REDIS_RATE_LIMIT: '0' }))).toEqual({ AGENT_REDIS_RATE_LIMIT: '0' });
    expect(() => parse({ SANDBOX_REDIS_RATE_LIMIT: '-1' })).toThrow(/SANDBOX_REDIS_RATE_LIMIT/);
  });

  it('passes the OTLP endpoint beside it', () => {
    expect(
      agentEnvFor(
        parse({
          NATS_URL: 'nats://nats:4222',
          OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
          AGENT_OTEL_EXPORTER_OTLP_ENDPOINT: 'http://10.0.0.1:4318',
        }),
      ),
    ).toEqual({ ...rate, AGENT_LOG_ARCHIVE: '1', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://10.0.0.1:4318' });
    expect(agentEnvFor(parse({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }))).toEqual({
      ...rate,
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
    });
  });

  it('refuses a bad NATS_URL or LOG_ARCHIVE, naming it', () => {
    expect(() => parse({ NATS_URL: 'http://nats' })).toThrow(/NATS_URL must start with nats:\/\//);
    expect(() => parse({ LOG_ARCHIVE: 'maybe' })).toThrow(/LOG_ARCHIVE must be on or off/);
  });
});
