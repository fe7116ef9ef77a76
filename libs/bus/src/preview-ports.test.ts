import { connectTestRedis, uniqueSuffix } from '@sandstream/test-support';
import { afterAll, describe, expect, it } from 'vitest';
import { DispatchKeys } from './dispatch-keys.js';
import { jobFootprint } from './job-footprint.js';
import { JobStore } from './job-store.js';
import { createKeySpace } from './key-space.js';
import { previewLabel } from './preview-label.js';
import { isPublicPort, registerPreview, sandboxOfLabel } from './preview-ports.js';
import { freeSandboxFootprint, sandboxFootprint } from './sandbox-footprint.js';
import { tearDownSandbox } from './sandbox-teardown.js';

const redis = connectTestRedis();
const keys = createKeySpace(`t-${uniqueSuffix()}`);
const used: string[] = [];

afterAll(async () => {
  if (used.length) await redis.unlink(...used);
  redis.disconnect();
});

/** A sandbox with a private and a public preview URL asked for. */
async function previewed(): Promise<{ id: string; label: string }> {
  const id = `acme:preview-${uniqueSuffix()}`;
  await registerPreview(redis, keys, { tenant: 'acme', sandboxId: id, port: 3000, public: false });
  const label = await registerPreview(redis, keys, {
    tenant: 'acme',
    sandboxId: id,
    port: 8000,
    public: true,
  });
  used.push(keys.jobPreview(id), keys.previewLabel(label));
  expect(await sandboxOfLabel(redis, keys, label)).toBe(id);
  expect(await isPublicPort(redis, keys, id, 8000)).toBe(true);
  expect(await isPublicPort(redis, keys, id, 3000)).toBe(false);
  return { id, label };
}

describe('preview entries', () => {
  it('go with the sandbox: its destroy frees the label and public ports, a pause keeps them', async () => {
    const { id, label } = await previewed();
    expect(sandboxFootprint(keys, id).preview).toEqual([keys.jobPreview(id)]);
    // Never under the sandbox's own prefix: its Redis user cannot open its ports.
    expect(keys.jobPreview(id).startsWith(keys.sandboxPrefix(id))).toBe(false);
    // No expiry of their own: they live as long as the sandbox.
    expect(await redis.ttl(keys.jobPreview(id))).toBe(-1);
    expect(await redis.ttl(keys.previewLabel(label))).toBe(-1);

    await freeSandboxFootprint(redis, keys, id, { keepOutput: true, keepPreview: true });
    expect(await sandboxOfLabel(redis, keys, label)).toBe(id);

    await freeSandboxFootprint(redis, keys, id, { keepOutput: true });
    expect(await sandboxOfLabel(redis, keys, label)).toBeNull();
    expect(await isPublicPort(redis, keys, id, 8000)).toBe(false);
    expect(await redis.exists(keys.jobPreview(id))).toBe(0);
    // Idempotent.
    await freeSandboxFootprint(redis, keys, id, { keepOutput: true });
  });

  it('a teardown frees them, but not a pause or a start attempt the job retries', async () => {
    const { id, label } = await previewed();
    // No backend sandbox named (`ref`): only the Redis side of the teardown runs.
    const deps = { redis, keys, acl: null, backend: { destroy: async () => {} } };
    const teardown = { jobId: id, graceMs: 0, keepOutput: true };
    await tearDownSandbox(deps, { ...teardown, keepFiles: async () => {} });
    await tearDownSandbox(deps, { ...teardown, keepPreview: true });
    expect(await sandboxOfLabel(redis, keys, label)).toBe(id);
    expect(await isPublicPort(redis, keys, id, 8000)).toBe(true);
    await tearDownSandbox(deps, teardown);
    expect(await sandboxOfLabel(redis, keys, label)).toBeNull();
    expect(await isPublicPort(redis, keys, id, 8000)).toBe(false);
  });

  it("are a job's keys too: deleting the job takes them, and the label it names", async () => {
    const { id, label } = await previewed();
    expect(jobFootprint(keys, new DispatchKeys(keys), id).keys).toContain(keys.jobPreview(id));
    expect(previewLabel('acme', id)).toBe(label);
    await new JobStore({ redis, keys }).delete(id, 'acme');
    expect(await sandboxOfLabel(redis, keys, label)).toBeNull();
    expect(await redis.exists(keys.jobPreview(id))).toBe(0);
  });

  it('a label entry that names another sandbox stays', async () => {
    const { id, label } = await previewed();
    await redis.set(keys.previewLabel(label), 'acme:someone-else');
    await freeSandboxFootprint(redis, keys, id, { keepOutput: true });
    expect(await sandboxOfLabel(redis, keys, label)).toBe('acme:someone-else');
    expect(await redis.exists(keys.jobPreview(id))).toBe(0);
  });
});
