import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pollUntil, statusKb } from '@sandstream/test-support';
import { AGENT_ONLY_ENV } from '@sandstream/wire';
import {
  childPids,
  deleteKeys,
  dropFromPageCache,
  peakRssKb,
  popResult,
  pushStep,
  rssKb,
  seaCommand,
  startAgent,
  stopAgent,
  testClient,
} from '../src/testing/agent-harness.js';

export interface MemoryVariantReport {
  idleMb: number;
  /** VmRSS split at idle: anonymous (heap, stacks) vs file-backed (the executable's pages). */
  idleAnonMb: number;
  idleFileMb: number;
  /** VmHWM after each chatty step (the kernel's high-water mark since start). */
  chattyPeakMb: Record<string, number>;
}

export interface MemoryReport {
  bareNodeMb: number;
  variants: Record<string, MemoryVariantReport>;
}

const mb = (kb: number) => kb / 1024;

/** Baseline in the same run: a bare `node` that only waits. */
async function bareNodeKb(): Promise<number> {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  await new Promise((r) => setTimeout(r, 1500));
  const kb = rssKb(child.pid as number);
  child.kill('SIGKILL');
  return kb;
}

/**
 * (3) Agent RSS idle and its peak (VmHWM) during chatty steps, for `node dist/main.js` and for
 * the single executable started through its bundled loader (when it has been built).
 */
export async function benchMemory(sizes = [200_000, 1_000_000]): Promise<MemoryReport> {
  const bare = await bareNodeKb();
  console.log('\n(3) agent RSS (goal <= 80 MB idle and peak)');
  console.log(`    baseline: bare node process ${mb(bare).toFixed(1)} MB`);
  const variants: Record<string, MemoryVariantReport> = {};
  const sea = seaCommand();
  // The single executable twice: as `--inject` writes it into a sandbox (what every Docker and
  // Kubernetes sandbox runs), and evicted first so it is read back from disk. Its file-backed
  // pages are most of its RSS, and how many a process maps depends on how the file sits in the
  // page cache: the build's own output, written in large writes, maps ~10 MB more
  // (docs/benchmarks.md; agent/src/inject.ts writes in small ones for that reason).
  const commands: [string, readonly string[] | undefined, (() => void)?][] = [
    ['node dist/main.js', undefined],
  ];
  const binary = sea[3] as string;
  // The same bundle the single executable holds, run by an existing node (the in-process backend).
  const bundle = `${binary}.cjs`;
  if (existsSync(bundle)) commands.push(['node dist/sandstream-agent.cjs', [process.execPath, bundle]]);
  const injected = mkdtempSync(join(tmpdir(), 'bench-mem-inject-'));
  if (existsSync(binary)) {
    const result = spawnSync(sea[0] as string, [...sea.slice(1), '--inject', injected], { stdio: 'inherit' });
    if (result.status !== 0) throw new Error(`--inject ${injected} exited with ${result.status}`);
    commands.push([
      'single executable via loader, as --inject wrote it',
      seaCommand(injected, join(injected, 'lib')),
    ]);
    commands.push([
      'single executable via loader, read back from disk',
      sea,
      () => {
        try {
          dropFromPageCache(binary);
        } catch (err) {
          console.log(`    (${(err as Error).message})`);
        }
      },
    ]);
  } else console.log('    (single executable not built: npm run build -w @sandstream/agent)');
  try {
    for (const [name, command, before] of commands) {
      before?.();
      variants[name] = await measureOne(name, command, sizes);
    }
  } finally {
    rmSync(injected, { recursive: true, force: true });
  }
  return { bareNodeMb: mb(bare), variants };
}

async function measureOne(
  name: string,
  command: readonly string[] | undefined,
  sizes: number[],
): Promise<MemoryVariantReport> {
  const redis = testClient();
  // The environment every backend gives the agent (one malloc arena: libs/wire agent-process-env).
  const agent = startAgent({
    jobId: `bench-mem-${process.pid}-${Date.now()}`,
    command,
    env: { ...AGENT_ONLY_ENV },
  });
  const pid = agent.child.pid as number;
  try {
    await pollUntil(
      'agent heartbeat',
      async () => ((await redis.exists(agent.keys.heartbeat)) ? true : undefined),
      { intervalMs: 20 },
    );
    await new Promise((r) => setTimeout(r, 2000));
    const idle = rssKb(pid);
    const report: MemoryVariantReport = {
      idleMb: mb(idle),
      idleAnonMb: mb(statusKb(pid, 'RssAnon')),
      idleFileMb: mb(statusKb(pid, 'RssFile')),
      chattyPeakMb: {},
    };
    console.log(
      `    ${name}: idle ${report.idleMb.toFixed(1)} MB (anon ${report.idleAnonMb.toFixed(1)}, file ${report.idleFileMb.toFixed(1)}), VmHWM so far ${mb(peakRssKb(pid)).toFixed(1)} MB`,
    );
    for (const size of sizes) {
      await pushStep(redis, agent.keys, {
        schemaVersion: 1,
        stepId: `chatty-${size}`,
        command: 'seq',
        args: ['1', String(size)],
      });
      const result = await popResult(redis, agent.keys, 120);
      const peak = peakRssKb(pid);
      report.chattyPeakMb[String(size)] = mb(peak);
      // The native spawner is the agent's one long-lived child; its memory is the agent's too.
      const helpers = childPids(pid).map((child) => `${mb(peakRssKb(child)).toFixed(1)} MB`);
      console.log(
        `      VmHWM after seq 1 ${size}: ${mb(peak).toFixed(1)} MB, VmRSS then ${mb(rssKb(pid)).toFixed(1)} MB (anon ${mb(statusKb(pid, 'RssAnon')).toFixed(1)}, file ${mb(statusKb(pid, 'RssFile')).toFixed(1)}; dropped ${result.droppedLines?.toLocaleString('en-US')} lines); spawner helper VmHWM ${helpers.join(', ') || 'none'}`,
      );
    }
    return report;
  } finally {
    await stopAgent(agent);
    await deleteKeys(redis, agent.keys);
    redis.disconnect();
  }
}
