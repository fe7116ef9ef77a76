import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import type { Sandbox } from '@sandstream/client';
import { liveBackends, NatsServer, testRedisUrl } from '@sandstream/test-support';
import Dockerode from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TransportView, viewThrough } from '../helpers/sdk-transports.js';
import { type Stack, startStack } from '../helpers/services-stack.js';

// Snapshots of Docker sandboxes under gVisor (runsc) through the services, on each runsc runtime
// the engine has (docs/snapshots.md, "What is captured"): with runsc's default, exclusive file
// access the work volume is captured and restored by tar run in the container, since the host's
// writes into its files are not seen inside; with --file-access=shared the container layer too,
// through the host, as under runc (seed 003's /project at the root). snapshots.test.ts covers
// runc and in-process.

const docker = liveBackends().find((backend) => backend.name === 'docker');
/** The engine's runsc runtimes by root file access (npm test's bootstrap registers both). */
const runscRuntimes = await new Dockerode()
  .info()
  .then((info: { Runtimes?: Record<string, { path?: string; runtimeArgs?: string[] | null }> }) =>
    Object.entries(info.Runtimes ?? {}).filter(([, r]) => basename(r.path ?? '') === 'runsc'),
  )
  .catch(() => []);
const runtimeWith = (shared: boolean) =>
  runscRuntimes.find(([, r]) => (r.runtimeArgs ?? []).includes('--file-access=shared') === shared)?.[0];
const runtimes = { exclusive: runtimeWith(false), shared: runtimeWith(true) };

describe.skipIf(!docker || runscRuntimes.length === 0)('snapshots of gVisor Docker sandboxes', () => {
  let nats: NatsServer;
  let stack: Stack;
  let view: TransportView;
  const open: Sandbox[] = [];

  beforeAll(async () => {
    if (!docker) return;
    const templates = join(mkdtempSync(join(tmpdir(), 'sandstream-snap-gvisor-')), 'templates.yaml');
    // runtimeClass names the engine's runtime as given when it is not a known class (gvisor → runsc).
    const entries = Object.entries(runtimes)
      .filter(([, runtime]) => runtime)
      .map(([access, runtime]) => `  ${access}:\n    image: ${docker.image}\n    runtimeClass: ${runtime}\n`);
    writeFileSync(templates, `templates:\n${entries.join('')}`);
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

  const create = async (template: 'exclusive' | 'shared') => {
    const sandbox = await view.client.sandboxes.create({ template });
    open.push(sandbox);
    return sandbox;
  };
  const sh = async (sandbox: Sandbox, command: string) => (await sandbox.exec(command)).stdout;
  // gVisor 20221219 refuses coreutils' statx (so `stat`, `ls -l`): find prints modes instead.
  const listing = 'sha256sum blob src/a.txt; find src/a.txt -printf "%m\\n"; readlink link';

  it.each((['exclusive', 'shared'] as const).filter((access) => runtimes[access]))(
    '%s file access: restores in place what was removed inside gVisor, and forks that diverge',
    async (access) => {
      const sandbox = await create(access);
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
    },
    300_000,
  );

  it.skipIf(!runtimes.shared)(
    "shared file access: seed 003's rollback of /project at the root, and a fork that sees it",
    async () => {
      const sandbox = await create('shared');
      await sh(sandbox, 'mkdir /project && echo "Hello World" > /project/hello.txt');
      const taken = await sandbox.snapshot({ name: 'project' });
      await sh(sandbox, 'rm -r /project');
      await sandbox.restore(taken.snapshotId);
      expect(await sh(sandbox, 'cat /project/hello.txt')).toBe('Hello World\n');
      const [fork] = await sandbox.fork({ count: 1 });
      if (fork) open.push(fork);
      expect(await sh(fork as Sandbox, 'uname -r; cat /project/hello.txt')).toBe('4.4.0\nHello World\n');
    },
    300_000,
  );
});
