import { randomBytes } from 'node:crypto';
import { dockerEngine } from '@sandstream/test-support';
import type Dockerode from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testImages } from '../testing/docker-test-env.js';
import { captureDocker, containerLayout, restoreDocker } from './docker-snapshot.js';

// The capture and restore of a Docker sandbox's files, on a plain container of the test image
// (the agent plays no part in them): the container layer anywhere (seed 003's /project at the
// root), deletions of image files, and the work volume.
const { docker, skip } = await dockerEngine('docker snapshots');
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

async function start(suffix: string): Promise<Dockerode.Container> {
  const container = await docker.createContainer({
    name: `${name}-${suffix}`,
    Image: testImages.debian,
    Entrypoint: ['sleep', 'infinity'],
    WorkingDir: '/work',
    HostConfig: { Mounts: [{ Type: 'volume', Source: `${name}-${suffix}-work`, Target: '/work' }] },
  });
  containers.push(container);
  await container.start();
  return container;
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
  afterAll(async () => {
    for (const c of containers) {
      await c.remove({ force: true, v: true }).catch(() => {});
      await docker
        .getVolume(`${c.id}`)
        .remove()
        .catch(() => {});
    }
    for (const suffix of ['a', 'b'])
      await docker
        .getVolume(`${name}-${suffix}-work`)
        .remove()
        .catch(() => {});
  });

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
    const restored = await restoreDocker(layout, [snapshot]);
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
    await restoreDocker(await containerLayout(docker, b.id, '/work'), [snapshot]);
    expect(await sh(b, 'cat /project/f.txt; test -e /etc/issue || echo no-issue')).toBe('forked\nno-issue\n');
    await sh(b, 'echo diverged > /project/f.txt');
    expect(await sh(a, 'cat /project/f.txt')).toBe('forked\n');
  }, 120_000);
});
