import type { V1EnvVar } from '@kubernetes/client-node';
import type { AgentConnection } from '../backend.js';

/** Where the carrier's entrypoint puts the agent and the glibc loader it runs under. */
export const SHARED_MOUNT = '/shared';
export const AGENT_LOADER = `${SHARED_MOUNT}/lib/ld-linux-x86-64.so.2`;
export const AGENT_BINARY = `${SHARED_MOUNT}/sandstream-agent`;

/**
 * The toolchain container's command. The agent runs under the loader it brought along, so the
 * image's own libc (glibc, musl or none) does not matter. Settings travel as environment rather
 * than argv: REDIS_URL may carry a password, and argv is visible in every `ps` in the pod.
 */
export function agentCommand(): string[] {
  return [AGENT_LOADER, '--library-path', `${SHARED_MOUNT}/lib`, AGENT_BINARY];
}

/**
 * Agent settings as the environment variables the agent reads (see agent/src/config.ts).
 * REDIS_URL is not here: it is a plain value or a secretKeyRef, decided by the caller.
 */
export function agentEnvironment(jobId: string, agent: AgentConnection, workdir: string): V1EnvVar[] {
  const env: V1EnvVar[] = [
    { name: 'JOB_ID', value: jobId },
    { name: 'AGENT_KEY_STYLE', value: agent.keyStyle },
    { name: 'AGENT_WORKDIR', value: workdir },
  ];
  if (agent.notifyStream) env.push({ name: 'AGENT_NOTIFY_STREAM', value: agent.notifyStream });
  if (agent.heartbeatIntervalMs !== undefined) {
    env.push({ name: 'AGENT_HEARTBEAT_INTERVAL_MS', value: String(agent.heartbeatIntervalMs) });
  }
  return env;
}
