import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Sandbox } from '@sandstream/client';
import { liveBackends, NatsServer, testRedisUrl } from '@sandstream/test-support';
import Dockerode from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TransportView, viewThrough } from '../helpers/sdk-transports.js';
import { type Stack, startStack } from '../helpers/services-stack.js';

// Snapshots of Docker sandboxes under gVisor (runsc) through the services: the work volume is
// captured and restored by tar run in the container (docs/snapshots.md, "What is captured"),
// since the host's writes into a runsc container's files are not seen inside. Where the engine
// has runsc; snapshots.test.ts covers runc and in-process.

const docker = liveBackends().find((backend) => backend.name === 'docker');
const runsc = await new Dockerode()
  .info()
  .then((info: { Runtimes?: Record<string, unknown> }) => Boolean(info.Runtimes?.runsc))
  .catch(() => false);

describe.skipIf(!docker || !runsc)('snapshots of gVisor Docker sandboxes', () => {
  let nats: NatsServer;
  let stack: Stack;
  let view: TransportView;
  const open: Sandbox[] = [];

  beforeAll(async () => {
    if (!docker) return;
    const templates = join(mkdtempSync(join(tmpdir(), 'sandstream-snap-gvisor-')), 'templates.yaml');
    writeFileSync(templates, `templates:\n  gvisor:\n    image: ${docker.image}\n    runtimeClass: gvisor\n`);
    nats = await NatsServer.start({ jetstream: true });
    stack = await startStack({
      label: 'snap-gvis',
      env: {
        ...docker.env,
        SANDSTREAM_TEMPLATES_FILE: templates,
        NATS_URL: nats.url,
        LOG_ARCHIVE: 'off',
        SNAPSHOT_CACHE_MAX_BYTES: '0',
      },
    });
    view = await viewThrough(stack, 'redis', testRedisUrl());
  }, 180_000);

  afterAll(async () => {
    await Promise.all(open.map((s) => s.close().catch(() => {})));
    await view?.stop();
    await stack?.stop();
    await nats?.stop();
  }, 180_000);

  const create = async () => {
    const sandbox = await view.client.sandboxes.create({ template: 'gvisor' });
    open.push(sandbox);
    return sandbox;
  };
  const sh = async (sandbox: Sandbox, command: string) => (await sandbox.exec(command)).stdout;
  // gVisor 20221219 refuses coreutils' statx (so `stat`, `ls -l`): find prints modes instead.
  const listing = 'sha256sum blob src/a.txt; find src/a.txt -printf "%m\\n"; readlink link';

  it('restores in place what was removed inside gVisor, and forks that diverge', async () => {
    const sandbox = await create();
    expect(await sh(sandbox, 'uname -r')).toBe('4.4.0\n');
    await sh(
      sandbox,
      'mkdir -p src/empty && printf "hi\\n" > src/a.txt && chmod 751 src/a.txt && ln -s src/a.txt link && head -c 300000 /dev/urandom > blob',
    );
    const before = await sh(sandbox, listing);
    const taken = await sandbox.snapshot({ name: 'before' });
    expect(taken).toMatchObject({ fromSandbox: sandbox.id, backend: 'docker' });

    await sh(sandbox, 'rm -r src link && echo new > added && echo changed > blob');
    const restored = await sandbox.restore(taken.snapshotId);
    expect(restored.entries).toBeGreaterThan(0);
    expect(await sh(sandbox, listing)).toBe(before);
    expect(await sh(sandbox, 'test -d src/empty && echo dir; test -e added || echo gone')).toBe(
      'dir\ngone\n',
    );

    const forks = await sandbox.fork({ count: 2 });
    open.push(...forks);
    await Promise.all(forks.map((f, i) => sh(f, `echo ${i} >> src/a.txt`)));
    expect(await Promise.all(forks.map((f) => sh(f, 'uname -r; cat src/a.txt')))).toEqual([
      '4.4.0\nhi\n0\n',
      '4.4.0\nhi\n1\n',
    ]);
    expect(await sh(sandbox, 'cat src/a.txt')).toBe('hi\n');
  }, 300_000);
});
