import { busLua } from './bus-lua.js';
import type { KeySpace } from './key-space.js';
import { previewLabel } from './preview-label.js';
import type { RedisClient } from './redis-connection.js';

const RELEASE_LABEL = busLua.load('preview-label-release');

/** The field of the sandbox's preview hash (KeySpace.jobPreview) that holds its label. */
const LABEL_FIELD = 'label';
const portField = (port: number) => `port:${port}`;

/**
 * What the preview proxy needs beside the sandbox's record: which host-form label names which
 * sandbox, and which of its ports were made public. Both are written when a URL is asked for
 * (services/api, or an SDK over Redis) and live as long as the sandbox: its destroy frees them
 * (freeSandboxFootprint → freePreviewEntries), and the reaper's delete of the job takes the
 * preview hash with the record (jobFootprint) and the label index entry after it
 * (JobStore.delete), for an entry written in a race with the destroy. No expiry of their own.
 */
export async function registerPreview(
  redis: RedisClient,
  keys: KeySpace,
  input: { tenant: string; sandboxId: string; port: number; public: boolean },
): Promise<string> {
  const label = previewLabel(input.tenant, input.sandboxId);
  // The hash first: a destroy that reads it then finds the label to free (separate commands,
  // the two keys live in different slots of a cluster).
  await redis.hset(keys.jobPreview(input.sandboxId), {
    [LABEL_FIELD]: label,
    ...(input.public ? { [portField(input.port)]: 'public' } : {}),
  });
  await redis.set(keys.previewLabel(label), input.sandboxId);
  return label;
}

/** The sandbox a host-form label names, if one was registered. */
export async function sandboxOfLabel(
  redis: RedisClient,
  keys: KeySpace,
  label: string,
): Promise<string | null> {
  return redis.get(keys.previewLabel(label));
}

/** Whether `port` of the sandbox was made public (no key or token needed). */
export async function isPublicPort(
  redis: RedisClient,
  keys: KeySpace,
  sandboxId: string,
  port: number,
): Promise<boolean> {
  return (await redis.hget(keys.jobPreview(sandboxId), portField(port))) === 'public';
}

/**
 * Frees a sandbox's preview entries: the label index entry (only while it still names this
 * sandbox), then its preview hash. Idempotent; a crash between the two leaves the hash, so a
 * repeat still finds the label.
 */
export async function freePreviewEntries(
  redis: RedisClient,
  keys: KeySpace,
  sandboxId: string,
): Promise<void> {
  const label = await redis.hget(keys.jobPreview(sandboxId), LABEL_FIELD);
  if (label) await releasePreviewLabel(redis, keys, label, sandboxId);
  await redis.unlink(keys.jobPreview(sandboxId));
}

/** Frees a label index entry if it still names the sandbox (a re-made sandbox's stays). */
export async function releasePreviewLabel(
  redis: RedisClient,
  keys: KeySpace,
  label: string,
  sandboxId: string,
): Promise<void> {
  await RELEASE_LABEL.run<number>(redis, [keys.previewLabel(label)], [sandboxId]);
}
