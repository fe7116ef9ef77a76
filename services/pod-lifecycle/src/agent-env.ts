import type { PodLifecycleEnv } from './pod-lifecycle-config.js';

/**
 * Variables pod-lifecycle adds to every agent's environment (the backends put them into the
 * container, pod or process as they do the agent's own settings). Visible to sandboxed code:
 * nothing secret goes here.
 *
 * - OTEL_EXPORTER_OTLP_ENDPOINT: the agent's step spans go where this service's spans go,
 *   unless AGENT_OTEL_EXPORTER_OTLP_ENDPOINT says otherwise.
 * - AGENT_LOG_ARCHIVE=1 when the installation archives logs (NATS_URL set, LOG_ARCHIVE not
 *   `off`, as the archiver decides): the agent then slows a chatty step down instead of dropping
 *   lines, and leaves the trimming of its events stream to the archiver.
 * - AGENT_REDIS_RATE_LIMIT: the sandbox's Redis rate limit (SANDBOX_REDIS_RATE_LIMIT, which the
 *   step-dispatcher enforces): the agent writes output at half of it, packing lines into fewer
 *   stream entries when a step prints faster, so that its own output never gets it stopped.
 */
export function agentEnvFor(
  env: Pick<
    PodLifecycleEnv,
    | 'AGENT_OTEL_EXPORTER_OTLP_ENDPOINT'
    | 'OTEL_EXPORTER_OTLP_ENDPOINT'
    | 'NATS_URL'
    | 'LOG_ARCHIVE'
    | 'SANDBOX_REDIS_RATE_LIMIT'
  >,
): Record<string, string> {
  const agentEnv: Record<string, string> = { AGENT_REDIS_RATE_LIMIT: String(env.SANDBOX_REDIS_RATE_LIMIT) };
  const otlp = env.AGENT_OTEL_EXPORTER_OTLP_ENDPOINT ?? env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (otlp) agentEnv.OTEL_EXPORTER_OTLP_ENDPOINT = otlp;
  if (logArchiveOn(env)) agentEnv.AGENT_LOG_ARCHIVE = '1';
  return agentEnv;
}

/** The archiver runs when NATS_URL is set, unless LOG_ARCHIVE=off. */
export function logArchiveOn(env: Pick<PodLifecycleEnv, 'NATS_URL' | 'LOG_ARCHIVE'>): boolean {
  return env.NATS_URL !== undefined && env.LOG_ARCHIVE !== 'off';
}
