import { liveBackends, NatsServer } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiStack, startApiStack } from '../helpers/api-stack.js';

// Seed 003's snapshot example over its own REST paths, exactly as issue 30 section 7 writes it,
// on the Docker backend: /project is made at the container's root (outside the workspace), the
// snapshot taken, /project removed, the snapshot restored, and the file is back.
const docker = liveBackends().find((b) => b.name === 'docker');

let s: ApiStack;
let nats: NatsServer;

describe.skipIf(!docker)("seed 003's rollback over /api/sandbox on Docker", () => {
  beforeAll(async () => {
    nats = await NatsServer.start({ jetstream: true });
    s = await startApiStack({
      label: 'api-snap',
      env: { ...(docker?.env ?? {}), NATS_URL: nats.url, LOG_ARCHIVE: 'off' },
      apiEnv: { API_DEFAULT_IMAGE: docker?.image ?? 'sandstream/debian:bookworm' },
    });
  }, 180_000);

  afterAll(async () => {
    await s?.stop();
    await nats?.stop();
  }, 120_000);

  const post = async (path: string, body?: unknown) => {
    const response = await s.request(path, {
      method: 'POST',
      ...(body === undefined
        ? {}
        : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };

  it('snapshot, rm -r /project, restore: cat prints Hello World', async () => {
    const created = await post('/api/sandbox', { id: 's1' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect((await post('/api/sandbox/s1/exec', { command: 'mkdir /project' })).body).toMatchObject({
      exitCode: 0,
    });
    expect(
      (await post('/api/sandbox/s1/exec', { command: "echo 'Hello World' > /project/hello.txt" })).body,
    ).toMatchObject({ exitCode: 0 });
    const snapshot = await post('/api/sandbox/s1/snapshot');
    expect(snapshot.status, JSON.stringify(snapshot.body)).toBe(201);
    const { snapshotId } = snapshot.body as { snapshotId: string };
    expect(snapshotId).toMatch(/^snap-/);
    expect((await post('/api/sandbox/s1/exec', { command: 'rm -r /project' })).body).toMatchObject({
      exitCode: 0,
    });
    expect(
      (await post('/api/sandbox/s1/exec', { command: 'cat /project/hello.txt' })).body,
    ).not.toMatchObject({
      exitCode: 0,
    });
    const restored = await post('/api/sandbox/s1/restore', { snapshotId });
    expect(restored.status, JSON.stringify(restored.body)).toBe(200);
    expect((await post('/api/sandbox/s1/exec', { command: 'cat /project/hello.txt' })).body).toMatchObject({
      exitCode: 0,
      stdout: 'Hello World\n',
    });

    // The v1 paths see the same snapshot; a restore of an unknown one is a 404 naming it.
    const listed = await s.request('/v1/sandboxes/s1/snapshots');
    expect(((await listed.json()) as Array<{ snapshotId: string }>).map((x) => x.snapshotId)).toContain(
      snapshotId,
    );
    const unknown = await post('/v1/sandboxes/s1/restore', { snapshotId: 'snap-00000000000000000000' });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ snapshotId: 'snap-00000000000000000000' });
    const fork = await post('/v1/sandboxes/s1/fork', { count: 2 });
    expect(fork.status, JSON.stringify(fork.body)).toBe(201);
    const { sandboxIds } = fork.body as { sandboxIds: string[] };
    expect(sandboxIds).toHaveLength(2);
    for (const id of sandboxIds) {
      expect(
        (await post(`/v1/sandboxes/${id}/exec`, { command: 'cat /project/hello.txt' })).body,
      ).toMatchObject({
        stdout: 'Hello World\n',
      });
      await s.request(`/v1/sandboxes/${id}`, { method: 'DELETE' });
    }
    const tooMany = await post('/v1/sandboxes/s1/fork', { count: 101 });
    expect(tooMany.status).toBe(400);
    expect(JSON.stringify(tooMany.body)).toContain('count is at most 100');
    await s.request('/api/sandbox/s1', { method: 'DELETE' });
  }, 240_000);
});
