import type { KeySpace } from './key-space.js';
import { previewLabel } from './preview-label.js';
import type { RedisClient } from './redis-connection.js';

/**
 * What the preview proxy needs beside the sandbox's record: which host-form label names which
 * sandbox, and which of its ports were made public. Both are written when a URL is asked for
 * (services/api, or an SDK over Redis) and kept this long: a sandbox lives at most a day by
 * default, and a stale entry only names a sandbox that the proxy then finds closed.
 */
const PREVIEW_ENTRY_SECONDS = 7 * 24 * 3600;

const labelKey = (keys: KeySpace, label: string) => keys.api(`preview-label:${label}`);
const publicKey = (keys: KeySpace, sandboxId: string) => keys.api(`preview-public:${sandboxId}`);

/** Records the label of (tenant, sandbox) and, when asked, opens `port` to anyone. */
export async function registerPreview(
  redis: RedisClient,
  keys: KeySpace,
  input: { tenant: string; sandboxId: string; port: number; public: boolean },
): Promise<string> {
  const label = previewLabel(input.tenant, input.sandboxId);
  // Separate commands: the two keys may live in different slots of a cluster.
  await Promise.all([
    redis.set(labelKey(keys, label), input.sandboxId, 'EX', PREVIEW_ENTRY_SECONDS),
    input.public
      ? redis
          .sadd(publicKey(keys, input.sandboxId), String(input.port))
          .then(() => redis.expire(publicKey(keys, input.sandboxId), PREVIEW_ENTRY_SECONDS))
      : undefined,
  ]);
  return label;
}

/** The sandbox a host-form label names, if one was registered. */
export async function sandboxOfLabel(
  redis: RedisClient,
  keys: KeySpace,
  label: string,
): Promise<string | null> {
  return redis.get(labelKey(keys, label));
}

/** Whether `port` of the sandbox was made public (no key or token needed). */
export async function isPublicPort(
  redis: RedisClient,
  keys: KeySpace,
  sandboxId: string,
  port: number,
): Promise<boolean> {
  return (await redis.sismember(publicKey(keys, sandboxId), String(port))) === 1;
}
