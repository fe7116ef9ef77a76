import type { V1EnvVar } from '@kubernetes/client-node';
import { agentEnvironment } from '../agent-command.js';
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
 * Agent settings as container environment, from the same table every backend uses
 * (../agent-command.ts), except REDIS_URL: the caller decides whether that is a plain value or a
 * secretKeyRef.
 */
export function agentEnvVars(jobId: string, agent: AgentConnection, workdir: string): V1EnvVar[] {
  return Object.entries(agentEnvironment({ jobId, agent, workdir }))
    .filter(([name]) => name !== 'REDIS_URL')
    .map(([name, value]) => ({ name, value }));
}
