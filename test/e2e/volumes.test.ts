import { spawnSync } from 'node:child_process';
import { ApiKeyStore, VolumeStore } from '@sandstream/bus';
import {
  type Sandbox,
  SandboxConflictError,
  SandboxLimitError,
  SandstreamClient,
  VolumeInUseError,
  VolumeNotFoundError,
} from '@sandstream/client';
import { liveBackends, testRedisUrl } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli-run.js';
import { OpenApiDocument } from '../helpers/openapi-check.js';
import { type TransportView, viewThrough } from '../helpers/sdk-transports.js';
import { type Stack, startStack } from '../helpers/services-stack.js';

// Volumes end to end (docs/volumes.md): the four services as processes, a volume written by one
// sandbox and read by a later one, one writer at a time, shared readers, delete refused in use,
// files without a sandbox of yours, tenants kept apart, a job mounting one; on the in-process
// backend and on Docker (a named volume), over Redis; the HTTP API and the CLI in-process.

const redisUrl = testRedisUrl();
const backends = liveBackends();

/** Docker volumes this run made (removed after, whatever the reaper did). */
const dockerVolumes = new Set<string>();
afterAll(() => {
  for (const name of dockerVolumes) spawnSync('docker', ['volume', 'rm', '-f', name], { stdio: 'ignore' });
});

describe.each(backends)('volumes ($name backend, over Redis)', ({ name: backend, image, env }) => {
  let stack: Stack;
  let view: TransportView;
  beforeAll(async () => {
    stack = await startStack({
      label: backend === 'docker' ? 'vdock' : 'vol',
      env: {
        SCHEDULER_GLOBAL_SLOTS: '16',
        SCHEDULER_TENANT_SLOTS: '16',
        REAPER_INTERVAL_SECONDS: '5',
        ...env,
      },
    });
    view = await viewThrough(stack, 'redis', redisUrl);
    // The files API's helper sandbox runs this backend's image.
    client = new SandstreamClient({ redisUrl, namespace: stack.namespace, volumeHelperImage: image });
  });
  afterAll(async () => {
    // Sandboxes a failed test left open hold their volumes' backend objects: closed first.
    for (const s of (await client?.sandboxes.list({ state: 'ready' })) ?? []) {
      await client.sandboxes.close(s.id).catch(() => undefined);
    }
    await client?.close();
    await view?.stop();
    await stack?.stop();
  });
  let client: SandstreamClient;
  const id = (name: string) => `${stack.namespace}-${name}`;
  // A command's view of the mount: on Docker the path itself; in-process (a child process on the
  // host, no mount namespace) the link at that path under its directory, its working directory.
  const at = (path: string) => (backend === 'docker' ? path : path.slice(1));
  const track = (uid: string) => dockerVolumes.add(`sandstream-vol-${uid}`);

  it('keeps data across sandboxes; one writer at a time, named; readers share; delete refused in use', async () => {
    const volume = await client.volumes.create({ name: 'data', sizeLimitBytes: 64 * 1024 * 1024 });
    track(volume.uid);
    expect(volume).toMatchObject({ name: 'data', tenant: 'default', sizeLimitBytes: 64 * 1024 * 1024 });

    const writer = await client.sandboxes.create({
      id: id('writer'),
      image,
      volumes: [{ name: 'data', mountPath: '/data' }],
    });
    const wrote = await writer.exec([
      'sh',
      '-c',
      `mkdir -p ${at('/data/dir')} && echo hello > ${at('/data/dir/f.txt')}`,
    ]);
    expect(wrote.exitCode).toBe(0);
    // The agent's file steps reach the volume at its mount path too.
    expect(await writer.files.read('/data/dir/f.txt')).toBe('hello\n');

    // A second writer is refused, naming the sandbox that holds the volume; nothing is created.
    const refused = await client.sandboxes
      .create({ id: id('second'), image, volumes: [{ name: 'data', mountPath: '/data' }] })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(VolumeInUseError);
    expect((refused as VolumeInUseError).holder).toBe(id('writer'));
    expect((refused as Error).message).toContain(`sandbox ${id('writer')}`);
    expect(await client.sandboxes.get(id('second'))).toBeNull();

    // Readers share it, with the writer too.
    const readers: Sandbox[] = [];
    for (const r of ['r1', 'r2']) {
      readers.push(
        await client.sandboxes.create({
          id: id(r),
          image,
          volumes: [{ name: 'data', mountPath: '/reads', readOnly: true }],
        }),
      );
    }
    for (const reader of readers) {
      expect((await reader.exec(['cat', at('/reads/dir/f.txt')])).stdout).toBe('hello\n');
    }
    if (backend === 'docker') {
      // Read-only is the engine's: a write fails in the sandbox.
      const denied = await readers[0]?.exec(['sh', '-c', 'echo x > /reads/other.txt']);
      expect(denied?.exitCode).not.toBe(0);
      expect(denied?.stderr).toMatch(/Read-only file system/i);
    }
    const [listed] = await client.volumes.list();
    expect(listed?.holders.map((h) => h.sandboxId).sort()).toEqual([id('r1'), id('r2'), id('writer')].sort());

    const inUse = await client.volumes.delete('data').catch((e: unknown) => e);
    expect(inUse).toBeInstanceOf(VolumeInUseError);

    // Closing gives the holds back (the teardown): a later writer mounts it and finds the file.
    await writer.close();
    for (const reader of readers) await reader.close();
    const later = await client.sandboxes.create({
      id: id('later'),
      image,
      volumes: [{ name: 'data', mountPath: '/mnt/again' }],
    });
    expect((await later.exec(['cat', at('/mnt/again/dir/f.txt')])).stdout).toBe('hello\n');
    await later.close();
  });

  it('reads, writes and lists a volume without a sandbox of the caller', async () => {
    track((await client.volumes.create({ name: 'files' })).uid);
    const files = client.volumes.files('files');
    expect(await files.write('notes/a.txt', 'alpha\n')).toBe(6);
    expect(await files.read('/notes/a.txt')).toBe('alpha\n');
    // Once a file call answers, its helper holds the volume no more: a writer or a delete may come.
    expect((await client.volumes.get('files'))?.holders).toEqual([]);
    const listed = await files.list('notes');
    expect(listed.entries.map((e) => e.path)).toEqual(['a.txt']);
    // What the files API wrote, a sandbox sees.
    const box = await client.sandboxes.create({
      id: id('sees'),
      image,
      volumes: [{ name: 'files', mountPath: '/v', readOnly: true }],
    });
    expect((await box.exec(['cat', at('/v/notes/a.txt')])).stdout).toBe('alpha\n');
    // A write while the volume is only read elsewhere is fine; reading while another writes too.
    expect(await files.write('notes/b.txt', 'beta')).toBe(4);
    await box.close();
  });

  it('mounts a volume in a job', async () => {
    track((await client.volumes.create({ name: 'jobvol' })).uid);
    const { jobId } = await client.submit({
      id: id('job'),
      image,
      volumes: [{ name: 'jobvol', mountPath: '/out' }],
      steps: [{ command: 'sh', args: ['-c', `echo from-job > ${at('/out/result.txt')}`] }],
    });
    expect((await client.wait(jobId, { timeoutMs: 120_000 })).state).toBe('succeeded');
    expect(await client.volumes.files('jobvol').read('result.txt')).toBe('from-job\n');
  });

  it("keeps tenants apart: another tenant's volume is not found", async () => {
    const other = client.volumes.forTenant('other');
    expect(await other.get('data')).toBeNull();
    expect(await other.list()).toEqual([]);
    await expect(other.delete('data')).rejects.toBeInstanceOf(VolumeNotFoundError);
    await expect(
      client.sandboxes.create({
        id: id('thief'),
        tenant: 'other',
        image,
        volumes: [{ name: 'data', mountPath: '/data', readOnly: true }],
      }),
    ).rejects.toBeInstanceOf(VolumeNotFoundError);
    // The same name is free for the other tenant: a volume of its own.
    const own = await other.create({ name: 'data' });
    track(own.uid);
    expect(own.tenant).toBe('other');
    expect(own.uid).not.toBe((await client.volumes.get('data'))?.uid);

    // Another tenant asking for an id a sandbox of ours has is refused, and our holds stay.
    track((await client.volumes.create({ name: 'data' })).uid);
    const ours = await client.sandboxes.create({
      id: id('ours'),
      image,
      volumes: [{ name: 'data', mountPath: '/data' }],
    });
    await expect(
      client.sandboxes.create({
        id: id('ours'),
        tenant: 'other',
        image,
        volumes: [{ name: 'data', mountPath: '/data' }],
      }),
    ).rejects.toBeInstanceOf(SandboxConflictError);
    expect((await client.volumes.get('data'))?.holders).toEqual([{ sandboxId: id('ours'), readOnly: false }]);
    expect((await other.get('data'))?.holders).toEqual([]);
    await ours.close();
  });

  it('stops the writer of a volume past its size limit (disk-budget), which gives the volume back', async () => {
    track((await client.volumes.create({ name: 'small', sizeLimitBytes: 4 * 1024 * 1024 })).uid);
    const sandboxId = id('filler');
    const filler = await client.sandboxes.create({
      id: sandboxId,
      image,
      volumes: [{ name: 'small', mountPath: '/small' }],
    });
    const filling = Promise.resolve(
      filler.exec([
        'sh',
        '-c',
        `dd if=/dev/zero of=${at('/small/fill')} bs=1M count=8 2>/dev/null; sleep 600`,
      ]),
    ).catch((err: unknown) => err);
    await waitForAsync(
      'the writer to be stopped',
      async () => (await client.sandboxes.get(sandboxId))?.state === 'failed',
      60_000,
    );
    const record = await client.sandboxes.get(sandboxId);
    expect(record?.reason).toBe('disk-budget');
    expect(record?.message).toMatch(/^disk-budget: volume small holds .* over its sizeLimitBytes of 4 MB/);
    await filling;
    // However the sandbox ended, the volume is free again.
    await waitForAsync(
      'the hold to go',
      async () => (await client.volumes.get('small'))?.holders.length === 0,
      60_000,
    );
    await client.volumes.delete('small');
  }, 150_000);

  it('deletes a volume once free; the reaper removes its backend object', async () => {
    const volume = await client.volumes.create({ name: 'gone' });
    track(volume.uid);
    const box = await client.sandboxes.create({
      id: id('gone'),
      image,
      volumes: [{ name: 'gone', mountPath: '/g' }],
    });
    await box.close();
    await client.volumes.delete('gone');
    expect(await client.volumes.get('gone')).toBeNull();
    if (backend === 'docker') {
      const exists = () =>
        spawnSync('docker', ['volume', 'inspect', `sandstream-vol-${volume.uid}`], { stdio: 'ignore' })
          .status === 0;
      await waitFor('the reaper to remove the Docker volume', () => !exists(), 90_000);
    }
  });
});

async function waitForAsync(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function waitFor(what: string, check: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

describe('volumes over the HTTP API and the CLI (in-process backend)', () => {
  let stack: Stack;
  let view: TransportView;
  let otherKey: string;
  beforeAll(async () => {
    stack = await startStack({
      label: 'vhttp',
      env: { SCHEDULER_GLOBAL_SLOTS: '16', SCHEDULER_TENANT_SLOTS: '16' },
    });
    view = await viewThrough(stack, 'http', redisUrl);
    otherKey = (
      await new ApiKeyStore({ redis: stack.redis, keys: stack.client.keys }).create({ tenant: 'other' })
    ).key;
  });
  afterAll(async () => {
    await view?.stop();
    await stack?.stop();
  });
  const id = (name: string) => `${stack.namespace}-${name}`;

  it('creates, lists, reads and writes files, refuses a delete in use naming the holder, deletes', async () => {
    const client = view.client;
    const created = await client.volumes.create({ name: 'web' });
    expect(created).toMatchObject({ name: 'web', tenant: 'default', holders: [] });
    expect((await client.volumes.list()).map((v) => v.name)).toEqual(['web']);
    expect(await client.volumes.files('web').write('a/b.txt', 'over http\n')).toBe(10);
    expect(await client.volumes.files('web').read('a/b.txt')).toBe('over http\n');
    expect((await client.volumes.files('web').list('a')).entries.map((e) => e.path)).toEqual(['b.txt']);

    const box = await client.sandboxes.create({
      id: id('holder'),
      image: 'debian:bookworm-slim',
      volumes: [{ name: 'web', mountPath: '/w' }],
    });
    expect((await box.exec(['cat', 'w/a/b.txt'])).stdout).toBe('over http\n');
    const inUse = await client.volumes.delete('web').catch((e: unknown) => e);
    expect(inUse).toBeInstanceOf(VolumeInUseError);
    expect((inUse as VolumeInUseError).holder).toBe(id('holder'));
    const second = await client.sandboxes
      .create({
        id: id('second'),
        image: 'debian:bookworm-slim',
        volumes: [{ name: 'web', mountPath: '/w' }],
      })
      .catch((e: unknown) => e);
    expect(second).toBeInstanceOf(VolumeInUseError);
    expect((second as VolumeInUseError).holder).toBe(id('holder'));
    await box.close();
    await client.volumes.delete('web');
    expect(await client.volumes.get('web')).toBeNull();
  });

  it('answers as its OpenAPI document (generated from the zod schemas) says', async () => {
    const url = view.url as string;
    const doc = await OpenApiDocument.load(
      (await (await fetch(`${url}/openapi.json`)).json()) as Record<string, unknown>,
    );
    for (const path of ['/v1/volumes', '/v1/volumes/{name}', '/v1/volumes/{name}/files']) {
      expect(doc.paths.filter((p) => p.endsWith(` ${path}`)).length).toBeGreaterThan(0);
    }
    const problems: string[] = [];
    const call = async (method: string, path: string, body?: string, json = true) => {
      const response = await fetch(`${url}${path}`, {
        method,
        ...(body !== undefined
          ? { body, headers: { 'content-type': json ? 'application/json' : 'text/plain' } }
          : {}),
      });
      const text = await response.text();
      const type = response.headers.get('content-type') ?? '';
      problems.push(
        ...doc.check(
          method,
          path,
          response.status,
          type.includes('json') && text ? JSON.parse(text) : undefined,
        ),
      );
      return { status: response.status, text };
    };
    expect((await call('POST', '/v1/volumes', JSON.stringify({ name: 'doc' }))).status).toBe(201);
    expect((await call('POST', '/v1/volumes', JSON.stringify({ name: 'doc' }))).status).toBe(200);
    const refused = await call('POST', '/v1/volumes', JSON.stringify({ name: 'doc', size: 3 }));
    expect(refused.status).toBe(400);
    expect(refused.text).toContain('did you mean \\"sizeLimitBytes\\"?');
    expect((await call('GET', '/v1/volumes')).status).toBe(200);
    expect((await call('GET', '/v1/volumes/doc')).status).toBe(200);
    expect((await call('GET', '/v1/volumes/nope')).status).toBe(404);
    expect((await call('PUT', '/v1/volumes/doc/files?path=x.txt', 'doc\n', false)).status).toBe(200);
    expect(await call('GET', '/v1/volumes/doc/files?path=x.txt')).toEqual({ status: 200, text: 'doc\n' });
    expect((await call('GET', '/v1/volumes/doc/files?path=.&list=true')).status).toBe(200);
    expect((await call('DELETE', '/v1/volumes/doc')).status).toBe(204);
    expect(problems).toEqual([]);
  });

  it("answers another tenant's volume as not found, and refuses over its quota naming the limit", async () => {
    await view.client.volumes.create({ name: 'mine' });
    const other = new SandstreamClient({ url: view.url as string, apiKey: otherKey });
    try {
      expect(await other.volumes.get('mine')).toBeNull();
      await expect(other.volumes.files('mine').read('x')).rejects.toBeInstanceOf(VolumeNotFoundError);
      await expect(other.volumes.delete('mine')).rejects.toBeInstanceOf(VolumeNotFoundError);
      await new VolumeStore(stack.redis, stack.client.keys).setQuota('other', {
        maxCount: 1,
        maxBytes: 2 ** 40,
      });
      await other.volumes.create({ name: 'one' });
      const over = await other.volumes.create({ name: 'two' }).catch((e: unknown) => e);
      expect(over).toBeInstanceOf(SandboxLimitError);
      expect((over as Error).message).toContain('maxCount is 1');
    } finally {
      await other.close();
    }
  });

  it('the CLI: volume create, ls, rm; sandbox create --volume', async () => {
    const flags = view.cliFlags;
    const created = await runCli(['volume', 'create', 'cli-vol', '--size', '1Gi', ...flags], {});
    expect(created).toMatchObject({ status: 0, stdout: 'cli-vol\n' });
    const ls = await runCli(['volume', 'ls', '--json', ...flags], {});
    expect(JSON.parse(ls.stdout).find((v: { name: string }) => v.name === 'cli-vol')).toMatchObject({
      sizeLimitBytes: 1024 ** 3,
    });
    const box = await runCli(
      ['sandbox', 'create', 'debian:bookworm-slim', '--id', id('cli'), '--volume', 'cli-vol:/data', ...flags],
      {},
    );
    expect(box).toMatchObject({ status: 0, stdout: `${id('cli')}\n` });
    const ro = await runCli(
      [
        'sandbox',
        'create',
        'debian:bookworm-slim',
        '--id',
        id('cli-ro'),
        '--volume',
        'cli-vol:/data:ro',
        ...flags,
      ],
      {},
    );
    expect(ro.status).toBe(0);
    const refused = await runCli(['volume', 'rm', 'cli-vol', ...flags], {});
    expect(refused.status).toBe(1);
    expect(refused.stderr).toContain(id('cli'));
    const bad = await runCli(
      ['sandbox', 'create', 'debian:bookworm-slim', '--volume', 'cli-vol', ...flags],
      {},
    );
    expect(bad).toMatchObject({ status: 2 });
    expect(bad.stderr).toContain('--volume takes <name>:<path>[:ro]');
    await runCli(['sandbox', 'rm', id('cli'), ...flags], {});
    await runCli(['sandbox', 'rm', id('cli-ro'), ...flags], {});
    expect(await runCli(['volume', 'rm', 'cli-vol', ...flags], {})).toMatchObject({ status: 0 });
    const none = await runCli(['volume', 'rm', 'cli-vol', ...flags], {});
    expect(none.status).toBe(4);
  });
});
