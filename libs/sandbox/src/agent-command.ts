import { AGENT_ONLY_ENV } from '@sandstream/wire';
import type { AgentConnection } from './backend.js';

export interface AgentLaunch {
  jobId: string;
  agent: AgentConnection;
  /** The agent's working directory as seen inside the sandbox. */
  workdir: string;
  /** Exit after this long without steps, so a sandbox its owner forgot does not live forever. */
  idleTimeoutSeconds?: number;
}

/** The agent's flags (see agent/src/main.ts); the same for every backend. */
export function agentArgs(launch: AgentLaunch): string[] {
  // A URL with a password (e.g. a per-sandbox ACL user) goes only through REDIS_URL in the
  // environment (agentEnvironment): argv is world-readable in `ps` on the host, environ is not.
  const args = redisUrlHasPassword(launch.agent.redisUrl) ? [] : ['--redis-url', launch.agent.redisUrl];
  args.push('--job-id', launch.jobId, '--key-style', launch.agent.keyStyle, '--workdir', launch.workdir);
  if (launch.agent.notifyStream) args.push('--notify-stream', launch.agent.notifyStream);
  if (launch.agent.heartbeatIntervalMs !== undefined) {
    args.push('--heartbeat-interval-ms', String(launch.agent.heartbeatIntervalMs));
  }
  if (launch.idleTimeoutSeconds !== undefined) {
    args.push('--idle-timeout-seconds', String(launch.idleTimeoutSeconds));
  }
  if (launch.agent.live) args.push('--max-idle-waits', '0');
  if (launch.agent.awaitClaim) args.push('--await-claim');
  return args;
}

/**
 * The same settings in the agent's own environment names (agent/src/config.ts), so a
 * `spec.command` wrapper can start the agent without repeating flags; SANDSTREAM_JOB_ID marks
 * which job a process or container belongs to.
 */
export function agentEnvironment(launch: AgentLaunch): Record<string, string> {
  const env: Record<string, string> = {
    ...AGENT_ONLY_ENV,
    SANDSTREAM_JOB_ID: launch.jobId,
    REDIS_URL: launch.agent.redisUrl,
    JOB_ID: launch.jobId,
    AGENT_KEY_STYLE: launch.agent.keyStyle,
    AGENT_WORKDIR: launch.workdir,
  };
  if (launch.agent.notifyStream) env.AGENT_NOTIFY_STREAM = launch.agent.notifyStream;
  if (launch.agent.heartbeatIntervalMs !== undefined) {
    env.AGENT_HEARTBEAT_INTERVAL_MS = String(launch.agent.heartbeatIntervalMs);
  }
  if (launch.agent.live) env.AGENT_MAX_IDLE_WAITS = '0';
  if (launch.agent.awaitClaim) env.AGENT_AWAIT_CLAIM = '1';
  return env;
}

export function redisUrlHasPassword(url: string): boolean {
  try {
    return new URL(url).password !== '';
  } catch {
    // Not a parseable URL: keep it out of argv rather than risk printing a secret.
    return true;
  }
}
