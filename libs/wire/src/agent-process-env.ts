/**
 * Variables every backend puts into the agent's own environment for the agent alone.
 *
 * MALLOC_ARENA_MAX=1: glibc's malloc otherwise gives each of Node's threads (libuv's pool, V8's
 * platform workers) an arena of its own, and a chatty step leaves several of them partly used:
 * 4–8 MB of peak RSS that the agent's memory goal (≤ 80 MB) cannot spare (docs/benchmarks.md).
 * The agent's JavaScript runs on one thread, so one arena costs it nothing measurable. It must be
 * in the environment before the process starts (malloc reads it once), and it must not reach the
 * user's commands (a threaded build would pay for it): the marker tells the agent it was set for
 * it, and dropAgentOnlyEnv removes both before any step runs.
 */
const AGENT_ONLY: Readonly<Record<string, string>> = { MALLOC_ARENA_MAX: '1' };
export const AGENT_ONLY_ENV: Readonly<Record<string, string>> = {
  ...AGENT_ONLY,
  SANDSTREAM_AGENT_ONLY_ENV: Object.keys(AGENT_ONLY).join(','),
};

/** Removes what AGENT_ONLY_ENV set (names listed by its marker), so steps inherit none of it. */
export function dropAgentOnlyEnv(env: Record<string, string | undefined>): void {
  const names = env.SANDSTREAM_AGENT_ONLY_ENV;
  if (names === undefined) return;
  for (const name of names.split(',')) if (/^[A-Z_][A-Z0-9_]*$/.test(name)) delete env[name];
  delete env.SANDSTREAM_AGENT_ONLY_ENV;
}
