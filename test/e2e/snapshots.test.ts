import { randomUUID } from 'node:crypto';
import { JobStore, parseLiveSandboxSpec, QueueNames, SnapshotStore, submitParsedJob } from '@sandstream/bus';
import {
  type Sandbox,
  SandboxClosedError,
  SandboxLimitError,
  SandboxNotFoundError,
  SnapshotCorruptError,
  SnapshotNotFoundError,
} from '@sandstream/client';
import { liveBackends, NatsServer, testRedisUrl } from '@sandstream/test-support';
import { Queue } from 'bullmq';
import { connect as connectNats } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli-run.js';
import { TRANSPORTS, type TransportView, viewThrough } from '../helpers/sdk-transports.js';
import { type Stack, startStack } from '../helpers/services-stack.js';

// Issue 30, sections 1, 2 and 5: snapshots end to end through the services (pod-lifecycle takes
// and restores them; their bytes in a NATS JetStream object store of its own here), on the
// in-process backend and on Docker, over both SDK transports and the CLI.

const MAX_SNAPSHOTS = 12;

for (const backend of liveBackends()) {
  describe(`snapshots on ${backend.name}`, () => {
    let nats: NatsServer;
    let stack: Stack;
    const views = new Map<string, TransportView>();
    const open: Sandbox[] = [];

    beforeAll(async () => {
      nats = await NatsServer.start({ jetstream: true });
      stack = await startStack({
        label: `snap-${backend.name}`,
        env: {
          ...backend.env,
          NATS_URL: nats.url,
          LOG_ARCHIVE: 'off',
          SNAPSHOT_MAX_COUNT_PER_TENANT: String(MAX_SNAPSHOTS),
          // Every restore here reads the object store (a damaged stored object must be refused,
          // not served whole from pod-lifecycle's local capture cache), and forks wait for their
          // snapshot's upload as forks on another node do. The cache: fork-cache.test.ts.
          SNAPSHOT_CACHE_MAX_BYTES: '0',
        },
      });
      for (const transport of TRANSPORTS)
        views.set(transport, await viewThrough(stack, transport, testRedisUrl()));
    }, 180_000);

    afterAll(async () => {
      await Promise.all(open.map((s) => s.close().catch(() => {})));
      for (const view of views.values()) await view.stop();
      await stack?.stop();
      await nats?.stop();
    }, 180_000);

    const create = async (view: TransportView, extra: Record<string, unknown> = {}) => {
      const sandbox = await view.client.sandboxes.create({ image: backend.image, ...extra });
      open.push(sandbox);
      return sandbox;
    };
    const sh = async (sandbox: Sandbox, command: string) => {
      const result = await sandbox.exec(command);
      return result.stdout;
    };

    for (const transport of TRANSPORTS) {
      it(`restores in place over ${transport}: added gone, removed back, modes, symlinks, empty dirs; running commands stopped and named`, async () => {
        const view = views.get(transport) as TransportView;
        const sandbox = await create(view);
        await sh(
          sandbox,
          'mkdir -p src/empty && printf "hi\\n" > src/a.txt && chmod 751 src/a.txt && ln -s src/a.txt link && head -c 300000 /dev/urandom > blob',
        );
        const before = await sh(sandbox, 'sha256sum blob src/a.txt; stat -c %a src/a.txt; readlink link');
        const taken = await sandbox.snapshot({ name: 'before' });
        expect(taken).toMatchObject({ fromSandbox: sandbox.id, name: 'before' });
        expect(taken.snapshotId).toMatch(/^snap-/);
        expect(taken.sizeBytes).toBeGreaterThan(0);
        expect(taken.frozenMs).toBeGreaterThanOrEqual(0);

        await sh(sandbox, 'rm -r src link && echo new > added && echo changed > blob');
        const sleeper = await sandbox.processes.start(['sleep', '600']);
        const restored = await sandbox.restore(taken.snapshotId);
        expect(restored.stoppedCommands).toContain(sleeper.id);
        expect(await sh(sandbox, 'sha256sum blob src/a.txt; stat -c %a src/a.txt; readlink link')).toBe(
          before,
        );
        expect(await sh(sandbox, 'test -d src/empty && echo dir; test -e added || echo gone')).toBe(
          'dir\ngone\n',
        );
      }, 180_000);
    }

    it('forks into 5 sandboxes that start alike and diverge', async () => {
      const view = views.get('http') as TransportView;
      const source = await create(view);
      await sh(source, 'echo shared > state.txt');
      const forks = await source.fork({ count: 5 });
      open.push(...forks);
      expect(new Set(forks.map((f) => f.id)).size).toBe(5);
      await Promise.all(forks.map((f, i) => sh(f, `cat state.txt && echo ${i} >> state.txt`)));
      const states = await Promise.all(forks.map((f) => sh(f, 'cat state.txt')));
      expect(states).toEqual([0, 1, 2, 3, 4].map((i) => `shared\n${i}\n`));
      expect(await sh(source, 'cat state.txt')).toBe('shared\n');
    }, 300_000);

    it('a sandbox from a snapshot holds its files at its first running, with no client step; a missing one fails the start naming it', async () => {
      const view = views.get('redis') as TransportView;
      const source = await create(view, { tenant: 'snap-s' });
      await sh(source, 'mkdir -p deep && echo at-start > deep/f.txt');
      const taken = await source.snapshot();
      // Submitted as any producer submits a spec (no SDK create, so nobody but the services acts on
      // fromSnapshot): its first command, sent the moment it is running, sees the snapshot's files.
      const store = new JobStore({ redis: stack.redis, keys: stack.client.keys });
      const jobs = new Queue(QueueNames.jobs, {
        connection: stack.redis,
        prefix: stack.client.keys.bullPrefix,
      });
      const submitRaw = async (fromSnapshot: string) => {
        const id = `raw-${randomUUID()}`;
        await submitParsedJob(
          store,
          jobs,
          parseLiveSandboxSpec({ id, tenant: 'snap-s', image: backend.image, fromSnapshot }),
        );
        return id;
      };
      try {
        const id = await submitRaw(taken.snapshotId);
        const copy = await view.client.sandboxes.connect(id);
        open.push(copy);
        expect(await sh(copy, 'cat deep/f.txt')).toBe('at-start\n');

        // A snapshot that is not there: the start fails for good, its reason naming the snapshot.
        const missing = `snap-${'0'.repeat(20)}`;
        const refused = await submitRaw(missing);
        await expect(view.client.sandboxes.connect(refused)).rejects.toThrow(SandboxClosedError);
        const failed = await view.client.sandboxes.get(refused);
        expect(failed?.state).toBe('failed');
        expect(failed?.message).toContain(`snapshot ${missing} not found`);

        // Over HTTP, a bare POST /v1/sandboxes naming only the snapshot: the API fills in its
        // spec, the services its files; the first exec right after the answer sees them.
        const http = views.get('http') as TransportView;
        const httpSource = await create(http);
        await sh(httpSource, 'echo over-http > h.txt');
        const httpSnap = await httpSource.snapshot();
        const answer = await fetch(`${http.url}/v1/sandboxes`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ fromSnapshot: httpSnap.snapshotId }),
        });
        expect(answer.status, await answer.clone().text()).toBe(201);
        const viaApi = http.client.sandboxes.handle(((await answer.json()) as { id: string }).id);
        open.push(viaApi);
        expect(await sh(viaApi, 'cat h.txt')).toBe('over-http\n');
      } finally {
        await jobs.close();
      }
    }, 240_000);

    it('creates from a snapshot; the CLI prints ids alone; another tenant finds nothing', async () => {
      const view = views.get('redis') as TransportView;
      const source = await create(view, { tenant: 'snap-a' });
      await sh(source, 'echo from-cli > f.txt');
      const created = await runCli([...view.cliFlags, 'snapshot', 'create', source.id], {});
      expect(created.status, created.stderr).toBe(0);
      const snapshotId = created.stdout.trim();
      expect(snapshotId).toMatch(/^snap-[0-9a-f]{20}$/);
      const listed = await runCli([...view.cliFlags, 'snapshot', 'ls'], {});
      expect(listed.stdout).toContain(snapshotId);
      const made = await runCli([...view.cliFlags, 'sandbox', 'create', '--from-snapshot', snapshotId], {});
      expect(made.status, made.stderr).toBe(0);
      const copy = await view.client.sandboxes.connect(made.stdout.trim());
      open.push(copy);
      expect(await sh(copy, 'cat f.txt')).toBe('from-cli\n');
      expect((await copy.info()).tenant).toBe('snap-a');

      // Tenant isolation: b sees neither the snapshot nor a's sandbox, and cannot restore a's snapshot.
      const other = await create(view, { tenant: 'snap-b' });
      expect(await view.client.snapshots.forTenant('snap-b').get(snapshotId)).toBeNull();
      await expect(view.client.snapshots.forTenant('snap-b').delete(snapshotId)).rejects.toThrow(
        SnapshotNotFoundError,
      );
      await expect(other.restore(snapshotId)).rejects.toThrow(SnapshotNotFoundError);
      await expect(view.client.sandboxes.handle(source.id, { tenant: 'snap-b' }).snapshot()).rejects.toThrow(
        SandboxNotFoundError,
      );
      const rm = await runCli([...view.cliFlags, 'snapshot', 'rm', snapshotId], {});
      expect(rm.status, rm.stderr).toBe(0);
      expect(await view.client.snapshots.get(snapshotId)).toBeNull();
    }, 240_000);

    it('refuses a truncated snapshot naming what is wrong, and a tenant over its quota naming the limit', async () => {
      const view = views.get('redis') as TransportView;
      const sandbox = await create(view, { tenant: 'snap-q' });
      await sh(sandbox, 'head -c 200000 /dev/urandom > r.bin');
      const taken = await sandbox.snapshot();
      // Damage the stored bytes behind the record's back: the object replaced by its first half.
      const nc = await connectNats({ servers: nats.url });
      try {
        const store = new SnapshotStore(nc, stack.namespace);
        const chunks: Buffer[] = [];
        for await (const chunk of await store.open(taken.snapshotId, {
          sizeBytes: taken.sizeBytes,
          sha256: taken.sha256 as string,
        }))
          chunks.push(chunk as Buffer);
        const whole = Buffer.concat(chunks);
        const { Readable } = await import('node:stream');
        await store.put(taken.snapshotId, Readable.from([whole.subarray(0, whole.length >> 1)]));
      } finally {
        await nc.close();
      }
      await sh(sandbox, 'echo after > r.bin');
      await expect(sandbox.restore(taken.snapshotId)).rejects.toThrow(SnapshotCorruptError);
      await expect(sandbox.restore(taken.snapshotId)).rejects.toThrow(/truncated in storage/);
      // A sandbox created from it is refused the same way, by pod-lifecycle as it starts.
      await expect(
        view.client.sandboxes.create({ tenant: 'snap-q', fromSnapshot: taken.snapshotId }),
      ).rejects.toThrow(new RegExp(`snapshot ${taken.snapshotId} is truncated in storage`));
      expect(await sh(sandbox, 'cat r.bin')).toBe('after\n');

      const held = (await view.client.snapshots.forTenant('snap-q').list()).length;
      for (let i = held; i < MAX_SNAPSHOTS; i++) await sandbox.snapshot();
      const refused = sandbox.snapshot();
      await expect(refused).rejects.toThrow(SandboxLimitError);
      await expect(sandbox.snapshot()).rejects.toThrow(/SNAPSHOT_MAX_COUNT_PER_TENANT/);
    }, 240_000);
  });
}
