/**
 * Fork and resume against a cold create (issue 30 §7), per backend this machine runs, every
 * figure against a baseline measured in the same run, rounds interleaved:
 *
 * 1. fork → first exec: `sandbox.fork({ count: 1 })` (snapshot of the source, a create from it
 *    whose files pod-lifecycle restores before `running`, the snapshot dropped) until the fork
 *    ran `true`, against a cold create → first exec. Goal: p50 ≤ 1.5×.
 *    Beside it, the fork as it was before (snapshot(), then create({ fromSnapshot }) from it),
 *    and create({ fromSnapshot }) → first exec (the fork without its snapshot). The medians of
 *    the phases pod-lifecycle logs (capture, open, restore) follow: the profile of the path.
 *    And the fork through a second stack whose pod-lifecycle runs with SNAPSHOT_FORK_COPY=off
 *    (its forks restore from the capture's stream, not a plain copy), in the same rounds.
 * 2. resume → first exec against a cold create + `restore()` of a snapshot holding the same
 *    bytes + first exec. Goal: resume p50 ≤ that baseline.
 *
 * The source sandbox holds WORKSPACE_MB of 1 MB files (written once, in the sandbox).
 *
 *   npm run build && npx vite-node test/bench/fork.bench.ts [rounds] [workspaceMb]
 *
 * With FORK_BENCH_PROFILE=<dir>, every service process writes a CPU profile of each of its
 * threads there when the stack stops (node --cpu-prof; scripts/cpu-profile-summary.mjs reads them).
 */
import { liveBackends, summarize } from '@sandstream/test-support';
import { startStack } from '../helpers/services-stack.js';

const ROUNDS = Number(process.argv[2] ?? 8);
const WORKSPACE_MB = Number(process.argv[3] ?? 10);
const ms = (n: number) => `${n.toFixed(0)} ms`;
const since = (t: number) => performance.now() - t;
const PROFILE_DIR = process.env.FORK_BENCH_PROFILE;

for (const backend of liveBackends()) {
  const stack = await startStack({
    label: 'fbench',
    env: { NATS_URL: process.env.NATS_URL ?? 'nats://127.0.0.1:4222', ...backend.env },
    ...(PROFILE_DIR ? { nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}/${backend.name}`] } : {}),
  });
  // The same fork without the same-node plain copy: the stream path, measured in the same rounds.
  const streamStack = await startStack({
    label: 'fbench-stream',
    env: {
      NATS_URL: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
      ...backend.env,
      SNAPSHOT_FORK_COPY: 'off',
    },
  });
  const figures = {
    cold: [] as number[],
    fork: [] as number[],
    forkStream: [] as number[],
    serial: [] as number[],
    fromSnapshot: [] as number[],
    resume: [] as number[],
    coldRestore: [] as number[],
  };
  const { sandboxes, snapshots } = stack.client;
  let phases = '';
  try {
    const source = await sandboxes.create({ image: backend.image });
    await source.exec(
      `mkdir -p data && for i in $(seq 1 ${WORKSPACE_MB}); do head -c 1048576 /dev/urandom > data/f$i.bin; done`,
    );
    const kept = await source.snapshot({ name: 'bench' });
    const streamSource = await streamStack.client.sandboxes.create({ image: backend.image });
    await streamSource.exec(
      `mkdir -p data && for i in $(seq 1 ${WORKSPACE_MB}); do head -c 1048576 /dev/urandom > data/f$i.bin; done`,
    );
    for (let round = 0; round < ROUNDS; round++) {
      let t = performance.now();
      const cold = await sandboxes.create({ image: backend.image });
      await cold.exec(['true']);
      figures.cold.push(since(t));

      t = performance.now();
      const [fork] = await source.fork({ count: 1 });
      await fork?.exec(['true']);
      figures.fork.push(since(t));
      await fork?.close();

      t = performance.now();
      const [streamFork] = await streamSource.fork({ count: 1 });
      await streamFork?.exec(['true']);
      figures.forkStream.push(since(t));
      await streamFork?.close();

      // The fork as it was before its creates overlapped the capture: snapshot, then create from it.
      t = performance.now();
      const taken = await source.snapshot();
      const serial = await sandboxes.create({ fromSnapshot: taken.snapshotId });
      await serial.exec(['true']);
      figures.serial.push(since(t));
      await serial.close();
      await snapshots.delete(taken.snapshotId);

      t = performance.now();
      const copy = await sandboxes.create({ fromSnapshot: kept.snapshotId });
      await copy.exec(['true']);
      figures.fromSnapshot.push(since(t));

      // Baseline 2: the cold sandbox gets the same bytes through an in-place restore.
      t = performance.now();
      await cold.restore(kept.snapshotId);
      await cold.exec(['true']);
      figures.coldRestore.push(since(t) + (figures.cold.at(-1) as number));
      await cold.close();

      await copy.pause();
      t = performance.now();
      await copy.resume();
      await copy.exec(['true']);
      figures.resume.push(since(t));
      await copy.close();
    }
    await snapshots.delete(kept.snapshotId);
    await source.close();
    await streamSource.close();
  } finally {
    phases = phasesOf(stack.logs());
    await stack.stop();
    await streamStack.stop();
  }
  const p50 = (xs: number[]) => summarize(xs).p50;
  console.log(`\n${backend.name}: ${ROUNDS} rounds, workspace ${WORKSPACE_MB} MB`);
  console.log(`  cold create → first exec             p50 ${ms(p50(figures.cold))}`);
  console.log(`  fork → first exec                    p50 ${ms(p50(figures.fork))}`);
  console.log(`  fork, stream path (copy off) → exec  p50 ${ms(p50(figures.forkStream))}`);
  console.log(`  snapshot, then create from it → exec p50 ${ms(p50(figures.serial))}`);
  console.log(`  create fromSnapshot → first exec     p50 ${ms(p50(figures.fromSnapshot))}`);
  console.log(
    `  fork / cold                          ${(p50(figures.fork) / p50(figures.cold)).toFixed(2)}×`,
  );
  console.log(
    `  fork, stream path / cold             ${(p50(figures.forkStream) / p50(figures.cold)).toFixed(2)}×`,
  );
  console.log(
    `  snapshot-then-create / cold          ${(p50(figures.serial) / p50(figures.cold)).toFixed(2)}×`,
  );
  console.log(
    `  fromSnapshot / cold                  ${(p50(figures.fromSnapshot) / p50(figures.cold)).toFixed(2)}×`,
  );
  console.log(`  resume → first exec                  p50 ${ms(p50(figures.resume))}`);
  console.log(`  cold create + restore + first exec   p50 ${ms(p50(figures.coldRestore))}`);
  console.log(
    `  resume / (cold + restore)            ${(p50(figures.resume) / p50(figures.coldRestore)).toFixed(2)}×`,
  );
  console.log(phases);
}

/**
 * Medians of the phases pod-lifecycle logs (the profile of the fork path): each capture's
 * queue hop, freeze lease, frozen capture + gzip + upload and commit; each start-from-snapshot's
 * open (record + stored bytes + checksum), the wait of the ready sandbox for it, and the restore.
 */
function phasesOf(logs: string): string {
  const fields = new Map<string, number[]>();
  const sources = new Map<string, number>();
  for (const line of logs.split('\n')) {
    if (!line.startsWith('{')) continue;
    let entry: Record<string, unknown>;
    try {
      entry = JSON.parse(line) as Record<string, unknown>;
    } catch {
      continue;
    }
    // A fork's capture that made a plain copy, and a start restored from one, apart from the rest.
    const prefix =
      entry.msg === 'snapshot taken'
        ? entry.copiedMs !== undefined
          ? 'capture (fork, copied)'
          : 'capture'
        : entry.msg === 'snapshot files restored into the new sandbox'
          ? entry.fromCopy
            ? 'start (from copy)'
            : 'start'
          : entry.msg === 'sandbox ready'
            ? 'create'
            : undefined;
    if (entry.msg === 'snapshot opened for a start') {
      const name = `opened from ${String(entry.from)}`;
      sources.set(name, (sources.get(name) ?? 0) + 1);
    }
    if (!prefix) continue;
    for (const [key, value] of Object.entries(entry)) {
      if (typeof value !== 'number' || !/Ms$|^ms$|^seconds$/.test(key)) continue;
      const name = `${prefix}.${key}`;
      fields.set(name, [...(fields.get(name) ?? []), key === 'seconds' ? value * 1000 : value]);
    }
  }
  return [
    ...[...fields]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([name, xs]) => `  ${name.padEnd(36)} p50 ${ms(summarize(xs).p50)} (n=${xs.length})`),
    ...[...sources].map(([name, n]) => `  starts ${name.padEnd(29)} ${n}`),
  ].join('\n');
}
