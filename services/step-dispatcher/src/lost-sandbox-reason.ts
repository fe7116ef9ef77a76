import { type KeySpace, type RedisClient, readSandboxUser } from '@sandstream/bus';

/**
 * Why a job's agent stopped heart-beating, as precisely as Redis can tell. The usual answer is
 * that the agent or its sandbox died; but after a Redis restart the agent may be alive and
 * merely locked out, because its Redis user was lost with the restart and could not be
 * re-created (no kept password hash). That case gets its own reason, so an operator does not
 * go looking for a crashed container.
 */
export async function lostSandboxReason(redis: RedisClient, keys: KeySpace, jobId: string): Promise<string> {
  return (await lockedOutReason(redis, keys, jobId)) ?? 'sandbox lost: the agent stopped heart-beating';
}

/**
 * The lost-sandbox reason of an agent locked out of Redis (its user gone), or undefined when it
 * is not: the heartbeat monitor asks it once and hands the answer on, so the user is looked up
 * once per lost sandbox.
 */
export async function lockedOutReason(
  redis: RedisClient,
  keys: KeySpace,
  jobId: string,
): Promise<string | undefined> {
  const user = await goneSandboxUser(redis, keys, jobId);
  if (!user) return undefined;
  return `sandbox lost: its Redis user ${user} no longer exists (Redis restarted without its ACL users and the user could not be re-created), so the agent cannot authenticate`;
}

/**
 * The job's sandbox Redis user when it no longer exists: its agent, however alive, can never
 * beat again. Undefined when it exists, when the job has none, or when Redis will not say.
 */
async function goneSandboxUser(
  redis: RedisClient,
  keys: KeySpace,
  jobId: string,
): Promise<string | undefined> {
  const kept = await readSandboxUser(redis, keys, jobId).catch(() => null);
  const user = kept?.username;
  if (!user) return undefined;
  const exists = await redis.call('ACL', 'GETUSER', user).then(
    (reply) => reply !== null,
    // No right to ask (or no ACL support): say nothing more than we know.
    () => true,
  );
  return exists ? undefined : user;
}
