import { type Sandbox, SandboxLimitError } from '@sandstream/client';
import { type LiveBackend, liveBackends } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from '../helpers/services-stack.js';

// Issue 30 §5: a paused sandbox's kept files are snapshot bytes of its tenant
// (SNAPSHOT_MAX_BYTES_PER_TENANT): while they are kept they count, a snapshot or a pause past the
// limit is refused with SandboxLimitError naming it, and a resume gives them back. The accounting
// does not depend on the backend: in-process only.

const MAX_BYTES = 300_000;
const backend = liveBackends()[0] as LiveBackend;

describe('paused files in the snapshot byte quota', () => {
  let stack: Stack;
  const open: Sandbox[] = [];

  beforeAll(async () => {
    stack = await startStack({
      label: 'pquota',
      env: {
        ...backend.env,
        NATS_URL: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
        LOG_ARCHIVE: 'off',
        SNAPSHOT_MAX_BYTES_PER_TENANT: String(MAX_BYTES),
      },
    });
  }, 180_000);

  afterAll(async () => {
    await Promise.all(open.map((s) => s.close().catch(() => {})));
    await stack?.stop();
  }, 180_000);

  const create = async (tenant: string) => {
    const sandbox = await stack.client.sandboxes.create({ image: backend.image, tenant });
    open.push(sandbox);
    return sandbox;
  };

  it('counts kept files until the resume: a snapshot and a pause over the limit are refused naming it', async () => {
    const paused = await create('pq-a');
    // Random bytes do not compress: the kept files are over the limit on their own.
    await paused.exec('head -c 400000 /dev/urandom > big.bin && sha256sum big.bin > sum.txt');
    await paused.pause();

    const other = await create('pq-a');
    await other.exec('echo small > s.txt');
    await expect(other.snapshot()).rejects.toThrow(SandboxLimitError);
    await expect(other.snapshot()).rejects.toThrow(/SNAPSHOT_MAX_BYTES_PER_TENANT/);
    // A pause is refused before anything stops: the sandbox keeps running.
    const refused = other.pause();
    await expect(refused).rejects.toThrow(SandboxLimitError);
    await expect(other.pause()).rejects.toThrow(/paused sandboxes' kept files/);
    expect((await other.exec('cat s.txt')).stdout).toBe('small\n');

    // Another tenant's quota is its own.
    const elsewhere = await create('pq-b');
    await expect(elsewhere.snapshot()).resolves.toMatchObject({ fromSandbox: elsewhere.id });

    // Resumed: its files are back, intact, and no longer kept, so the tenant's bytes are free.
    await paused.resume();
    expect((await paused.exec('sha256sum -c sum.txt')).stdout).toBe('big.bin: OK\n');
    const taken = await other.snapshot();
    expect(taken.sizeBytes).toBeGreaterThan(0);
    await stack.client.snapshots.forTenant('pq-a').delete(taken.snapshotId);
    await expect(other.pause()).resolves.toBeDefined();
  }, 240_000);
});
