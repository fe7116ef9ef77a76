import { randomBytes } from 'node:crypto';
import { StepChannel } from '@sandstream/sandbox/testing';
import { dockerEngine } from '@sandstream/test-support';
import { SCHEMA_VERSION, sandboxKeys } from '@sandstream/wire';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SandboxBackend, SandboxRef } from '../libs/sandbox/src/backend.js';
import { TOOLCHAIN_CONTAINER } from '../libs/sandbox/src/kubernetes/pod-builder.js';
import { execInPod } from '../libs/sandbox/src/kubernetes/pod-exec.js';
import { type KubeSandboxes, startKubeSandboxes } from './helpers/kube-sandboxes.js';
import type { KubeApiStandin } from './kube-api-standin/index.js';
import { images } from './kubernetes-test-env.js';

/**
 * Snapshot capture and restore of a pod's work volume through `pods/exec` (docs/snapshots.md),
 * against the stand-in, whose exec is a `docker exec`: GNU tar (Debian) and BusyBox tar.
 */
const { docker, skip } = await dockerEngine('kubernetes-snapshot');
const suffix = () => randomBytes(4).toString('hex');

/** The work tree as text: every path with its type, mode, size and checksum, or link target. */
const LISTING = `find . -mindepth 1 | sort | while read -r f; do
  if [ -L "$f" ]; then echo "$f -> $(readlink "$f")";
  elif [ -d "$f" ]; then echo "$f dir $(stat -c %a "$f")";
  else echo "$f $(stat -c '%a %s %Y' "$f") $(sha256sum < "$f" | cut -c1-16)"; fi
done`;

describe.skipIf(skip)('Kubernetes snapshots against kube-api-standin', () => {
  const namespace = `ksnap-${suffix()}`;
  let k: KubeSandboxes;
  let standin: KubeApiStandin;
  let redis: Redis;
  let blocking: Redis;
  let backend: SandboxBackend;

  beforeAll(async () => {
    k = await startKubeSandboxes({ docker, namespace });
    ({ standin, redis, backend } = k);
    blocking = redis.duplicate();
  });

  afterAll(async () => {
    blocking?.disconnect();
    await k?.close();
  });

  const start = async (image: string) => {
    const jobId = `ksnap-${suffix()}`;
    const ref = await k.start(k.request(jobId, { image }));
    const steps = new StepChannel(redis, blocking, sandboxKeys(jobId, 'tagged'));
    let n = 0;
    const sh = async (command: string) => {
      const stepId = `s${n++}`;
      const result = await steps.run({
        schemaVersion: SCHEMA_VERSION,
        stepId,
        kind: 'run',
        shell: true,
        command,
      });
      expect(result.exitCode, `${command}: ${(await steps.stdout(stepId)).join('\n')}`).toBe(0);
      return (await steps.stdout(stepId)).join('\n');
    };
    return { ref, sh };
  };

  /** How many processes in the pod's toolchain container are stopped (State T). */
  const stoppedIn = async (ref: SandboxRef) => {
    const run = await execInPod({
      kubeConfig: standin.kubeConfig(namespace),
      namespace,
      pod: ref.id,
      container: TOOLCHAIN_CONTAINER,
      command: ['sh', '-c', 'cat /proc/[0-9]*/status 2>/dev/null | grep -c "^State:.*T (stopped)" || true'],
    });
    let out = '';
    for await (const chunk of run.stdout) out += (chunk as Buffer).toString();
    await run.done;
    return Number(out.trim());
  };

  const capture = async (ref: SandboxRef) => {
    const cap = await backend.captureFiles!(ref);
    const chunks: Buffer[] = [];
    for await (const chunk of cap.stream) chunks.push(chunk as Buffer);
    return { chunks, ...(await cap.done), parts: cap.parts };
  };
  async function* replay(chunks: Buffer[]) {
    yield* chunks;
  }

  for (const [label, image] of [
    ['GNU tar (Debian)', images.debian],
    ['BusyBox tar', images.busybox],
  ] as const) {
    it(`captures the work volume and restores it in place and into a new pod: ${label}`, async () => {
      const a = await start(image);
      await a.sh(
        [
          'mkdir -p sub/deep empty .hidden',
          'printf hello > sub/a.txt && chmod 640 sub/a.txt',
          'head -c 300000 /dev/urandom > sub/deep/big.bin',
          'ln -s sub/a.txt link',
          'printf x > .hidden/dot',
          'touch -d @1700000000 sub/a.txt',
        ].join(' && '),
      );
      const before = await a.sh(LISTING);
      expect(before).toContain('./link -> sub/a.txt');
      expect(before).toContain('./empty dir');

      // Frozen while the capture reads: every process below the agent (its spawner at least) is
      // stopped, seen from outside through pods/exec (an agent step would wait for the thaw).
      const frozen = await backend.captureFiles!(a.ref);
      expect(await stoppedIn(a.ref)).toBeGreaterThan(0);
      frozen.stream.resume();
      expect((await frozen.done).frozenMs).toBeGreaterThan(0);
      expect(await stoppedIn(a.ref)).toBe(0);

      const snap = await capture(a.ref);
      expect(snap.parts).toEqual(['work']);
      expect(snap.entries).toBe(before.split('\n').length);
      expect(snap.frozenMs).toBeGreaterThanOrEqual(0);
      // Thawed: nothing of the sandbox is left stopped (State T) after the capture.
      expect(await a.sh('cat /proc/[0-9]*/status | grep "^State:" | grep -c "T (stopped)" || true')).toBe(
        '0',
      );

      await a.sh(
        'rm -r sub/deep empty link && printf changed > sub/a.txt && mkdir added && printf n > added/new.txt',
      );
      expect(await a.sh(LISTING)).not.toBe(before);

      const restored = await backend.restoreFiles!(a.ref, replay(snap.chunks));
      expect(restored.entries).toBe(snap.entries);
      expect(restored.bytes).toBe(300_000 + 5 + 1);
      expect(restored.removed).toBeGreaterThan(0);
      expect(await a.sh(LISTING)).toBe(before);
      expect(await a.sh('cat /proc/[0-9]*/status | grep "^State:" | grep -c "T (stopped)" || true')).toBe(
        '0',
      );

      // A new sandbox from the snapshot (what create({ fromSnapshot }) and resume run in pod-lifecycle).
      const b = await start(image);
      await b.sh('printf stray > stray.txt');
      await backend.restoreFiles!(b.ref, replay(snap.chunks));
      expect(await b.sh(LISTING)).toBe(before);

      // A snapshot cut short is refused, the sandbox's files left as they were.
      const cut = Buffer.concat(snap.chunks);
      await expect(
        backend.restoreFiles!(b.ref, replay([cut.subarray(0, cut.length - 40)])),
      ).rejects.toThrow();
    }, 60_000);
  }
});
