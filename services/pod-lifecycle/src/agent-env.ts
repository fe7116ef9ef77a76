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
 */
export function agentEnvFor(
  env: Pick<
    PodLifecycleEnv,
    'AGENT_OTEL_EXPORTER_OTLP_ENDPOINT' | 'OTEL_EXPORTER_OTLP_ENDPOINT' | 'NATS_URL' | 'LOG_ARCHIVE'
  >,
): Record<string, string> | undefined {
  const agentEnv: Record<string, string> = {};
  const otlp = env.AGENT_OTEL_EXPORTER_OTLP_ENDPOINT ?? env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (otlp) agentEnv.OTEL_EXPORTER_OTLP_ENDPOINT = otlp;
  if (logArchiveOn(env)) agentEnv.AGENT_LOG_ARCHIVE = '1';
  return Object.keys(agentEnv).length > 0 ? agentEnv : undefined;
}

/** The archiver runs when NATS_URL is set, unless LOG_ARCHIVE=off. */
export function logArchiveOn(env: Pick<PodLifecycleEnv, 'NATS_URL' | 'LOG_ARCHIVE'>): boolean {
  return env.NATS_URL !== undefined && env.LOG_ARCHIVE !== 'off';
}
