/**
 * Pause and resume (issue 30 §7), per backend this machine runs, each figure against a baseline
 * measured in the same run:
 *
 * 1. `pause()` → slot free: from the call until the sandbox's lease left the global lease set
 *    (the dispatcher releases it when it ends the life, before the files are kept), and until
 *    `pause()` answered (files kept, sandbox gone). Goal: slot free ≤ 1 s.
 * 2. resume → first exec, with a workspace of WORKSPACE_MB (1 MB files), against a cold create →
 *    first exec plus an upload of the same tree (the same bytes put back the ordinary way).
 *    Goal: resume p50 ≤ that baseline.
 *
 * Docker under gVisor (runsc, a template with `runtimeClass: gvisor`) too where the engine has it:
 * its files go through the container (tar by docker exec), the others' through the host.
 * PAUSE_BENCH_BACKENDS (comma-separated names: in-process, docker, docker+gvisor) picks some.
 *
 *   npm run build && npx vite-node test/bench/pause-resume.bench.ts [rounds] [workspaceMb]
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { liveBackends, summarize } from '@sandstream/test-support';
import Dockerode from 'dockerode';
import { startStack } from '../helpers/services-stack.js';

const ROUNDS = Number(process.argv[2] ?? 8);
const WORKSPACE_MB = Number(process.argv[3] ?? 20);
const ms = (n: number) => `${n.toFixed(0)} ms`;

function tree(): string {
  const root = mkdtempSync(join(tmpdir(), 'sandstream-pause-bench-'));
  const dir = join(root, 'data');
  mkdirSync(dir);
  for (let i = 0; i < WORKSPACE_MB; i++) writeFileSync(join(dir, `f${i}.bin`), Buffer.alloc(1024 * 1024, i));
  return root;
}

const runsc = await new Dockerode()
  .info()
  .then((info: { Runtimes?: Record<string, unknown> }) => Boolean(info.Runtimes?.runsc))
  .catch(() => false);
const backends: { name: string; image: string; template?: string; env: Record<string, string> }[] = [
  ...liveBackends(),
];
const docker = liveBackends().find((b) => b.name === 'docker');
if (docker && runsc) {
  const templates = join(mkdtempSync(join(tmpdir(), 'sandstream-pause-bench-gvisor-')), 'templates.yaml');
  writeFileSync(templates, `templates:\n  gvisor:\n    image: ${docker.image}\n    runtimeClass: gvisor\n`);
  backends.push({
    name: 'docker+gvisor',
    image: docker.image,
    template: 'gvisor',
    env: { ...docker.env, SANDSTREAM_TEMPLATES_FILE: templates },
  });
}
const only = process.env.PAUSE_BENCH_BACKENDS?.split(',');

for (const backend of backends.filter((b) => !only || only.includes(b.name))) {
  const stack = await startStack({
    label: 'pbench',
    env: { NATS_URL: process.env.NATS_URL ?? 'nats://127.0.0.1:4222', ...backend.env },
  });
  const local = tree();
  const lease = (id: string) => stack.redis.zscore(`{${stack.namespace}:leases}:global`, id);
  const slotFree: number[] = [];
  const pauseCall: number[] = [];
  const resumeFirstExec: number[] = [];
  const coldPlusUpload: number[] = [];
  try {
    for (let round = 0; round < ROUNDS; round++) {
      // Baseline: cold create → first exec, then the same bytes uploaded.
      let t = performance.now();
      const cold = await stack.client.sandboxes.create({
        id: `${stack.namespace}-cold-${round}`,
        ...(backend.template ? { template: backend.template } : { image: backend.image }),
      });
      await cold.exec(['true']);
      await cold.files.upload(join(local, 'data'), '.');
      coldPlusUpload.push(performance.now() - t);

      // The same sandbox paused and resumed.
      t = performance.now();
      let freedAt = 0;
      const watch = (async () => {
        while ((await lease(cold.id)) !== null) await new Promise((r) => setTimeout(r, 5));
        freedAt = performance.now();
      })();
      await cold.pause();
      pauseCall.push(performance.now() - t);
      await watch;
      slotFree.push(freedAt - t);

      t = performance.now();
      await cold.resume();
      await cold.exec(['true']);
      resumeFirstExec.push(performance.now() - t);
      await cold.close();
    }
  } finally {
    rmSync(local, { recursive: true, force: true });
    await stack.stop();
  }
  const s = (xs: number[]) => summarize(xs);
  console.log(`\n${backend.name}: ${ROUNDS} rounds, workspace ${WORKSPACE_MB} MB`);
  console.log(`  pause() → slot free      p50 ${ms(s(slotFree).p50)}  max ${ms(Math.max(...slotFree))}`);
  console.log(`  pause() answered         p50 ${ms(s(pauseCall).p50)}  max ${ms(Math.max(...pauseCall))}`);
  console.log(`  resume → first exec      p50 ${ms(s(resumeFirstExec).p50)}`);
  console.log(`  cold create + upload     p50 ${ms(s(coldPlusUpload).p50)}`);
  console.log(`  resume / baseline        ${(s(resumeFirstExec).p50 / s(coldPlusUpload).p50).toFixed(2)}×`);
}
