import { liveBackends } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type Stack, startStack } from '../helpers/services-stack.js';

// Issue 28 §1 through the services and the SDK, in-process and on Docker: pod-lifecycle's disk
// budget shows in stats(), and a sandbox filling its disk past the limit ends `failed` with
// reason `disk-budget` (the mechanics in detail: libs/sandbox docker-disk.test.ts,
// inprocess-disk.test.ts). On Docker the filler writes to /tmp, the container's own layer.
const MiB = 1024 * 1024;

describe.each(liveBackends())('a sandbox past its disk limit on $name (issue 28 §1)', (backend) => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({
      label: 'disk',
      env: { ...backend.env, SANDBOX_DEFAULT_DISK: '48Mi', SANDBOX_DISK_CHECK_MS: '500' },
    });
  }, 60_000);
  afterAll(async () => {
    await stack?.stop();
  });

  it('shows its disk use and limit in stats(), then fails with reason disk-budget when a filler crosses it', async () => {
    const id = `${stack.namespace}-fill`;
    await using sandbox = await stack.client.sandboxes.create({ id, image: backend.image });
    expect(await sandbox.files.write('a.txt', 'x'.repeat(100_000))).toBe(100_000);
    // Measured every SANDBOX_DISK_CHECK_MS and recorded on the sandbox's record.
    // (a measure that began before the write may land first: waited for one that saw it).
    await vi.waitUntil(async () => ((await sandbox.stats()).diskBytes ?? 0) >= 100_000, {
      timeout: 20_000,
      interval: 200,
    });
    const stats = await sandbox.stats();
    expect(stats.diskLimitBytes).toBe(48 * MiB);
    expect(stats.diskBytes).toBeGreaterThanOrEqual(100_000);
    expect(stats.diskBytes).toBeLessThan(48 * MiB);

    // exec answers a thenable handle: wrapped to hold its outcome without awaiting it yet.
    const filling = Promise.resolve(
      sandbox.exec([
        'sh',
        '-c',
        `i=0; while true; do dd if=/dev/zero of=${backend.name === 'docker' ? '/tmp/' : ''}fill-$i bs=1M count=4 2>/dev/null; i=$((i+1)); sleep 0.1; done`,
      ]),
    ).catch((err: unknown) => err);
    await vi.waitUntil(async () => (await stack.client.sandboxes.get(id))?.state === 'failed', {
      timeout: 30_000,
      interval: 200,
    });
    const record = await stack.client.sandboxes.get(id);
    expect(record?.reason).toBe('disk-budget');
    expect(record?.message).toMatch(/^disk-budget: the sandbox wrote .* over its limit of 48 MB/);
    // The command ends with its sandbox rather than running on.
    await filling;
  }, 90_000);
});
