import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { Readable } from 'node:stream';
import { dockerEngine, testRedisUrl } from '@sandstream/test-support';
import type Dockerode from 'dockerode';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { SandboxRef } from '../backend.js';
import { freezeByExec } from '../snapshot/signal-tree.js';
import { SnapshotCorruptError } from '../snapshot/snapshot-entry.js';
import { testImages } from '../testing/docker-test-env.js';
import { DockerBackend } from './docker-backend.js';
import { dockerExec } from './docker-exec.js';
import { captureDockerFiles, dockerFilesRoute, restoreDockerFiles, thawDockerFiles } from './docker-files.js';
import { captureDocker, containerLayout, restoreDocker } from './docker-snapshot.js';
import { GvisorFileAccess, sharesRootFiles } from './gvisor-file-access.js';

// The capture and restore of a Docker sandbox's files, on a plain container of the test image
// (the agent plays no part in them): the container layer anywhere (seed 003's /project at the
// root), deletions of image files, and the work volume.
const { docker, skip } = await dockerEngine('docker snapshots');

/**
 * The engine's runsc runtime whose root file access is shared with the host, or exclusive (npm
 * test's bootstrap registers both, as root: `runsc` shared, `runsc-exclusive`).
 */
async function runscRuntimes(shared: boolean): Promise<string[]> {
  if (skip) return [];
  const info = (await docker.info()) as {
    Runtimes?: Record<string, { path?: string; runtimeArgs?: string[] | null }>;
  };
  return Object.entries(info.Runtimes ?? {})
    .filter(([, r]) => basename(r.path ?? '') === 'runsc' && sharesRootFiles(r.runtimeArgs ?? []) === shared)
    .map(([name]) => name);
}
const runscRuntime = async (shared: boolean) => (await runscRuntimes(shared))[0];
const exclusiveRuntime = await runscRuntime(false);
/** An exclusive runsc runtime the backend does not know by name (`runsc-exclusive` as the bootstrap registers it). */
const renamedExclusive = skip ? undefined : (await runscRuntimes(false)).find((n) => n !== 'runsc');
const sharedRuntime = await runscRuntime(true);
const gvisorSkip =
  skip ??
  (exclusiveRuntime ? undefined : 'the Docker engine has no runsc runtime with exclusive file access');
const sharedSkip =
  skip ?? (sharedRuntime ? undefined : 'the Docker engine has no runsc runtime with --file-access=shared');
const name = `sandstream-snaptest-${randomBytes(4).toString('hex')}`;
const containers: Dockerode.Container[] = [];

async function sh(container: Dockerode.Container, command: string): Promise<string> {
  const exec = await container.exec({ Cmd: ['sh', '-c', command], AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({});
  const chunks: Buffer[] = [];
  stream.on('data', (d: Buffer) => chunks.push(d));
  await new Promise((resolve) => stream.on('end', resolve));
  // Docker's multiplexed frames: 8-byte headers before each payload.
  const raw = Buffer.concat(chunks);
  let out = '';
  for (let i = 0; i + 8 <= raw.length; ) {
    const size = raw.readUInt32BE(i + 4);
    out += raw.subarray(i + 8, i + 8 + size).toString('utf8');
    i += 8 + size;
  }
  return out;
}

async function start(
  suffix: string,
  options: { runtime?: string; entrypoint?: string[] } = {},
): Promise<Dockerode.Container> {
  const container = await docker.createContainer({
    name: `${name}-${suffix}`,
    Image: testImages.debian,
    Entrypoint: options.entrypoint ?? ['sleep', 'infinity'],
    WorkingDir: '/work',
    HostConfig: {
      Mounts: [{ Type: 'volume', Source: `${name}-${suffix}-work`, Target: '/work' }],
      ...(options.runtime ? { Runtime: options.runtime } : {}),
    },
  });
  containers.push(container);
  await container.start();
  return container;
}

/** The containers this file started, and their work volumes (named, so `v: true` leaves them). */
async function removeAll(): Promise<void> {
  for (const c of containers.splice(0)) {
    const { Name } = await c.inspect().catch(() => ({ Name: '' }));
    await c.remove({ force: true, v: true }).catch(() => {});
    if (Name)
      await docker
        .getVolume(`${Name.replace(/^\//, '')}-work`)
        .remove()
        .catch(() => {});
  }
}

async function bytesOf(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

describe.skipIf(skip)('Docker sandbox snapshots (container layer + work volume)', () => {
  let a: Dockerode.Container;
  beforeAll(async () => {
    a = await start('a');
  }, 60_000);
  afterAll(removeAll);

  it('restores in place: root-level dirs, image files deleted and changed, owners, symlinks, the work tree', async () => {
    await sh(
      a,
      [
        'mkdir /project /project/empty',
        "echo 'Hello World' > /project/hello.txt",
        'chown 1234:5678 /project/hello.txt && chmod 640 /project/hello.txt',
        'ln -s /project/hello.txt /project/link',
        'rm /etc/debian_version',
        'echo changed > /etc/hostname.bak',
        'rm -r /usr/share/doc && mkdir /usr/share/doc && echo mine > /usr/share/doc/only',
        'echo w > /work/w.txt',
      ].join(' && '),
    );
    const layout = await containerLayout(docker, a.id, '/work');
    const capture = await captureDocker(layout);
    const snapshot = await bytesOf(capture.stream);
    const { frozenMs } = await capture.done;
    expect(frozenMs).toBeGreaterThanOrEqual(0);
    expect((await a.inspect()).State.Paused).toBe(false);

    await sh(
      a,
      'rm -r /project && echo new > /added && echo 11 > /etc/debian_version && rm -r /usr/share/doc && rm /work/w.txt && echo x > /work/x',
    );
    const restored = await restoreDocker(layout, Readable.from([snapshot]));
    expect(restored.entries).toBeGreaterThan(0);
    expect(await sh(a, 'cat /project/hello.txt')).toBe('Hello World\n');
    expect(await sh(a, 'stat -c "%u:%g %a" /project/hello.txt')).toBe('1234:5678 640\n');
    expect(await sh(a, 'readlink /project/link; test -d /project/empty && echo empty-dir')).toBe(
      '/project/hello.txt\nempty-dir\n',
    );
    expect(await sh(a, 'test -e /added || echo added-gone')).toBe('added-gone\n');
    expect(await sh(a, 'test -e /etc/debian_version || echo removed-stays-removed')).toBe(
      'removed-stays-removed\n',
    );
    expect(await sh(a, 'ls /usr/share/doc')).toBe('only\n');
    expect(await sh(a, 'ls /work')).toBe('w.txt\n');
  }, 120_000);

  it('a fresh container from the same image gets the same files (a fork)', async () => {
    await sh(a, 'mkdir -p /project && echo forked > /project/f.txt && rm -f /etc/issue');
    const capture = await captureDocker(await containerLayout(docker, a.id, '/work'));
    const snapshot = await bytesOf(capture.stream);
    const b = await start('b');
    await restoreDocker(await containerLayout(docker, b.id, '/work'), Readable.from([snapshot]));
    expect(await sh(b, 'cat /project/f.txt; test -e /etc/issue || echo no-issue')).toBe('forked\nno-issue\n');
    await sh(b, 'echo diverged > /project/f.txt');
    expect(await sh(a, 'cat /project/f.txt')).toBe('forked\n');
  }, 120_000);
});

// gVisor (runsc) with its default, exclusive file access: the host's view of its files is not the
// sandbox's (a write from the host into its layer is not seen inside, docs/snapshots.md), so its
// work volume goes through the container: `tar` run by `docker exec`, its processes stopped from
// inside meanwhile.
describe.skipIf(gvisorSkip)(
  'Docker sandbox snapshots under gVisor, exclusive file access (work volume, through the container)',
  () => {
    const runtime = exclusiveRuntime ?? 'runsc-exclusive';
    const gvisor = new GvisorFileAccess(docker, new Set([runtime]));
    let ga: Dockerode.Container;
    beforeAll(async () => {
      // A process below PID 1, as the agent's commands are: frozen during the capture, running after.
      ga = await start('ga', {
        runtime,
        entrypoint: ['sh', '-c', 'sleep infinity & echo $! > /tmp/child; wait'],
      });
    }, 60_000);
    afterAll(removeAll);

    const childState = async () => (await sh(ga, 'grep State /proc/$(cat /tmp/child)/status')).trim();
    const capture = async (container: Dockerode.Container, whileFrozen?: () => Promise<void>) => {
      const route = await dockerFilesRoute(docker, container.id, gvisor);
      expect(route.kind).toBe('exec');
      const captured = await captureDockerFiles(docker, route);
      expect(captured.parts).toEqual(['work']);
      await whileFrozen?.();
      const snapshot = await bytesOf(captured.stream);
      await captured.done;
      return snapshot;
    };
    const restore = async (container: Dockerode.Container, snapshot: Buffer) =>
      restoreDockerFiles(
        docker,
        await dockerFilesRoute(docker, container.id, gvisor),
        Readable.from([snapshot]),
      );

    it('restores in place what was removed inside: dirs, owners, modes, symlinks; its processes thawed', async () => {
      await sh(
        ga,
        [
          'mkdir -p /work/project/empty /work/project/deep/er',
          "echo 'Hello World' > /work/project/hello.txt",
          'chown 1234:5678 /work/project/hello.txt && chmod 640 /work/project/hello.txt',
          'ln -s hello.txt /work/project/link',
          'head -c 300000 /dev/urandom > /work/project/deep/er/blob.bin',
          'sha256sum /work/project/deep/er/blob.bin > /tmp/blob.sum',
          'echo dot > /work/.hidden',
        ].join(' && '),
      );
      // Stopped (T) from the freeze until the archive was read, sleeping (S) again after.
      const snapshot = await capture(ga, async () => expect(await childState()).toMatch(/State:\s+T/));
      expect(await childState()).toMatch(/State:\s+S/);

      // What a host-side restore could not bring back: a directory removed inside gVisor.
      await sh(ga, 'rm -r /work/project /work/.hidden && echo x > /work/x && mkdir /work/newdir');
      const restored = await restore(ga, snapshot);
      expect(restored).toMatchObject({ removed: 2 });
      expect(await sh(ga, 'cat /work/project/hello.txt')).toBe('Hello World\n');
      expect(await sh(ga, "cd /work/project && find hello.txt -printf '%U:%G %m\\n' && readlink link")).toBe(
        '1234:5678 640\nhello.txt\n',
      );
      expect(
        await sh(ga, 'sha256sum -c /tmp/blob.sum && test -d /work/project/empty && echo empty-dir'),
      ).toBe('/work/project/deep/er/blob.bin: OK\nempty-dir\n');
      // gVisor 20221219 refuses coreutils' statx (EINVAL): find, not ls, lists.
      expect(await sh(ga, 'cd /work && find . -mindepth 1 -maxdepth 1 | sort')).toBe(
        './.hidden\n./project\n',
      );
      expect(await childState()).toMatch(/State:\s+S/);
    }, 120_000);

    it('a capture whose reader gives up thaws the sandbox and leaves no tar running in it', async () => {
      await sh(ga, 'mkdir -p /work/big && head -c 20000000 /dev/urandom > /work/big/blob.bin');
      const route = await dockerFilesRoute(docker, ga.id, gvisor);
      const captured = await captureDockerFiles(docker, route);
      for await (const _ of captured.stream) break; // one chunk, then the stream is destroyed
      await expect(captured.done).rejects.toThrow();
      expect(await childState()).toMatch(/State:\s+S/);
      const tars = () => sh(ga, 'cat /proc/[0-9]*/comm 2>/dev/null | grep -c "^tar$" || true');
      await vi.waitUntil(async () => (await tars()).trim() === '0', { timeout: 10_000, interval: 200 });
      await sh(ga, 'rm -r /work/big');
    }, 120_000);

    it("thaw (the freeze guard's sweep for a capture that died) lets a frozen gVisor sandbox run", async () => {
      await freezeByExec(dockerExec(docker, ga.id));
      expect(await childState()).toMatch(/State:\s+T/);
      await thawDockerFiles(docker, ga.id, gvisor);
      expect(await childState()).toMatch(/State:\s+S/);
    }, 60_000);

    it('a fresh gVisor container gets the same work tree (a fork); a runc snapshot with its layer is refused, a gVisor one restores on runc', async () => {
      await sh(ga, 'mkdir -p /work/project && echo forked > /work/project/f.txt');
      const snapshot = await capture(ga);
      const gb = await start('gb', { runtime });
      await restore(gb, snapshot);
      expect(await sh(gb, 'cat /work/project/f.txt')).toBe('forked\n');
      await sh(gb, 'echo diverged > /work/project/f.txt');
      expect(await sh(ga, 'cat /work/project/f.txt')).toBe('forked\n');

      // A runc container's snapshot holds its layer (root/), which this route cannot write.
      const runc = await start('gr');
      await sh(runc, 'echo layer > /layer.txt');
      const route = await dockerFilesRoute(docker, runc.id, gvisor);
      expect(route.kind).toBe('host');
      const withLayer = await captureDockerFiles(docker, route);
      const bytes = await bytesOf(withLayer.stream);
      await expect(restore(gb, bytes)).rejects.toThrow(SnapshotCorruptError);
      await expect(restore(gb, bytes)).rejects.toThrow(
        /root\/.*a gVisor \(runsc\) Docker sandbox without --file-access=shared restores only work\//,
      );
      expect(await sh(gb, 'cat /work/project/f.txt')).toBe('diverged\n');

      // The other way a gVisor snapshot restores: on runc, its layer back to the image.
      await restore(runc, snapshot);
      expect(await sh(runc, 'cat /work/project/f.txt; test -e /layer.txt || echo layer-reverted')).toBe(
        'forked\nlayer-reverted\n',
      );
    }, 120_000);
  },
);

// gVisor with `--file-access=shared`: the Sentry revalidates its root against the host, so the
// backend takes the runc route (container layer and work volume through the engine's directories,
// `docker pause` meanwhile). The backend is told the runtime is gVisor (its runtime map), as an
// operator naming it would, and finds from the engine which file access it has.
describe.skipIf(sharedSkip)(
  'Docker sandbox snapshots under gVisor, shared file access (container layer)',
  () => {
    const runtime = sharedRuntime ?? 'runsc';
    let redis: Redis;
    let backend: DockerBackend;
    beforeAll(() => {
      redis = new Redis(testRedisUrl(), { lazyConnect: true });
      backend = new DockerBackend({ docker, redis, egress: 'off', runtimes: { gvisor: runtime } });
    });
    afterAll(async () => {
      await removeAll();
      redis.disconnect();
    });
    const ref = (container: Dockerode.Container): SandboxRef => ({
      jobId: 'snaptest',
      backend: 'docker',
      id: container.id,
    });
    const capture = async (container: Dockerode.Container) => {
      const captured = await backend.captureFiles(ref(container));
      expect(captured.parts).toEqual(['root', 'work']);
      const snapshot = await bytesOf(captured.stream);
      await captured.done;
      expect((await container.inspect()).State.Paused).toBe(false);
      return snapshot;
    };

    it("seed 003's rollback: /project at the root removed inside comes back in place, deletions and additions reverted", async () => {
      const ga = await start('sa', { runtime });
      await sh(
        ga,
        [
          'mkdir /project /project/empty',
          "echo 'Hello World' > /project/hello.txt",
          'chown 1234:5678 /project/hello.txt && chmod 640 /project/hello.txt',
          'rm /etc/debian_version',
          'rm -r /usr/share/doc && mkdir /usr/share/doc && echo mine > /usr/share/doc/only',
          'echo w > /work/w.txt',
        ].join(' && '),
      );
      const snapshot = await capture(ga);

      await sh(
        ga,
        'rm -r /project && echo new > /added && echo 11 > /etc/debian_version && rm -r /usr/share/doc && rm /work/w.txt && echo x > /work/x',
      );
      await backend.restoreFiles(ref(ga), Readable.from([snapshot]));
      expect(await sh(ga, 'cat /project/hello.txt')).toBe('Hello World\n');
      // gVisor 20221219 refuses coreutils' statx (EINVAL): find, not stat or ls.
      expect(
        await sh(
          ga,
          "find /project/hello.txt -printf '%U:%G %m\\n'; test -d /project/empty && echo empty-dir",
        ),
      ).toBe('1234:5678 640\nempty-dir\n');
      expect(await sh(ga, 'test -e /added || echo added-gone')).toBe('added-gone\n');
      expect(await sh(ga, 'test -e /etc/debian_version || echo removed-stays-removed')).toBe(
        'removed-stays-removed\n',
      );
      expect(await sh(ga, 'cd /usr/share/doc && find . -mindepth 1')).toBe('./only\n');
      expect(await sh(ga, 'cd /work && find . -mindepth 1')).toBe('./w.txt\n');
    }, 120_000);

    it('a fresh gVisor container sees the root-level files (a fork), by the snapshot stream and by a plain copy', async () => {
      const ga = await start('sf', { runtime });
      await sh(ga, 'mkdir /project && echo forked > /project/f.txt && rm /etc/issue && echo w > /work/w.txt');
      const snapshot = await capture(ga);
      const gb = await start('sg', { runtime });
      await backend.restoreFiles(ref(gb), Readable.from([snapshot]));
      expect(await sh(gb, 'cat /project/f.txt /work/w.txt; test -e /etc/issue || echo no-issue')).toBe(
        'forked\nw\nno-issue\n',
      );
      await sh(gb, 'echo diverged > /project/f.txt');
      expect(await sh(ga, 'cat /project/f.txt')).toBe('forked\n');

      // A fork on this host: the plain copy (copyFiles) into a fresh container (restoreCopy).
      const into = await mkdtemp(join(tmpdir(), 'sandstream-gvcopy-'));
      try {
        await backend.copyFiles(ref(ga), join(into, 'copy'));
        const gc = await start('sh', { runtime });
        await backend.restoreCopy(ref(gc), join(into, 'copy'));
        expect(await sh(gc, 'cat /project/f.txt /work/w.txt; test -e /etc/issue || echo no-issue')).toBe(
          'forked\nw\nno-issue\n',
        );
      } finally {
        await rm(into, { recursive: true, force: true });
      }
    }, 180_000);

    it('a snapshot taken under runc, with its layer, restores on a gVisor sandbox', async () => {
      const runc = await start('sr');
      await sh(runc, 'echo layer > /layer.txt && rm /etc/issue && echo w > /work/w.txt');
      const snapshot = await capture(runc);
      const ga = await start('ss', { runtime });
      await sh(ga, 'echo mine > /mine.txt');
      await backend.restoreFiles(ref(ga), Readable.from([snapshot]));
      expect(
        await sh(
          ga,
          'cat /layer.txt /work/w.txt; test -e /etc/issue || echo no-issue; test -e /mine.txt || echo mine-gone',
        ),
      ).toBe('layer\nw\nno-issue\nmine-gone\n');
    }, 120_000);
  },
);

// A runsc runtime is gVisor by its binary, whatever the engine calls it: one with exclusive file
// access under a name the backend was not given must not take the host route, whose restore it
// would not see (docs/snapshots.md).
describe.skipIf(
  skip ?? (renamedExclusive ? undefined : 'the Docker engine has no exclusive runsc runtime but `runsc`'),
)('Docker sandbox snapshots under gVisor, a runtime known by its binary', () => {
  const runtime = renamedExclusive ?? 'runsc-exclusive';
  let redis: Redis;
  beforeAll(() => {
    redis = new Redis(testRedisUrl(), { lazyConnect: true });
  });
  afterAll(async () => {
    await removeAll();
    redis.disconnect();
  });

  it('goes through the container (work volume only), not through the host', async () => {
    const backend = new DockerBackend({ docker, redis, egress: 'off' });
    const ga = await start('sx', { runtime });
    await sh(ga, 'mkdir /project && echo w > /work/w.txt');
    const captured = await backend.captureFiles({ jobId: 'snaptest', backend: 'docker', id: ga.id });
    expect(captured.parts).toEqual(['work']);
    await bytesOf(captured.stream);
    await captured.done;
  }, 120_000);
});
