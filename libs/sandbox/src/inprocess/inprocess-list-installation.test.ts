import { randomBytes } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { testRedisUrl } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxLabels } from '../backend.js';
import { InProcessBackend } from './inprocess-backend.js';
import { writeMarker } from './local-markers.js';
import { isProcessAlive, processStartTime } from './process-control.js';
import type { InProcessRecord } from './sandbox-registry.js';

const tag = randomBytes(4).toString('hex');
const root = join(tmpdir(), `sandstream-inprocess-list-${tag}`);
const registryKey = `sandstream:test:inprocess-list:${tag}`;
let redis: Redis;

/** A marker as create() writes it, for an agent that is this very (live) test process. */
async function marker(jobId: string, installation: string): Promise<InProcessRecord> {
  const stateDir = join(root, 'jobs', `${jobId}-${tag}`);
  await mkdir(stateDir, { recursive: true });
  const record: InProcessRecord = {
    jobId,
    tenant: 'list-tenant',
    pid: process.pid,
    startTime: await processStartTime(process.pid),
    hostname: hostname(),
    stateDir,
    workspace: join(stateDir, 'workspace'),
    persistentWorkspace: false,
    keyStyle: 'plain',
    labels: { [SandboxLabels.installation]: installation, [SandboxLabels.jobId]: jobId },
    createdAt: new Date().toISOString(),
    volumeLimits: [],
  };
  await writeMarker(record);
  return record;
}

describe('InProcessBackend.list() with an installation', () => {
  beforeAll(async () => {
    redis = new Redis(testRedisUrl());
    await marker(`mine-${tag}`, `mine-${tag}`);
    await marker(`theirs-${tag}`, `theirs-${tag}`);
  });

  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
    await redis.unlink(registryKey);
    redis.disconnect();
  });

  it("never probes another installation's agent, and does not report it", async () => {
    const probed: number[] = [];
    const backend = new InProcessBackend({
      redis,
      root,
      registryKey,
      installation: `mine-${tag}`,
      liveness: (pid, startTime) => {
        probed.push(pid);
        return isProcessAlive(pid, startTime);
      },
    });
    const listed = await backend.list();
    expect(listed.map((s) => [s.jobId, s.state])).toEqual([[`mine-${tag}`, 'running']]);
    // One probe: this installation's agent; the other's marker was ruled out before any /proc read.
    expect(probed).toHaveLength(1);
  });

  it("with a test of the labels (the reaper's: names and ids), probes and reports only what it accepts", async () => {
    const probed: number[] = [];
    const seen: string[] = [];
    const backend = new InProcessBackend({
      redis,
      root,
      registryKey,
      installation: (labels) => {
        seen.push(labels[SandboxLabels.jobId] ?? '');
        return labels[SandboxLabels.installation] === `theirs-${tag}`;
      },
      liveness: (pid, startTime) => {
        probed.push(pid);
        return isProcessAlive(pid, startTime);
      },
    });
    const listed = await backend.list();
    expect(listed.map((s) => [s.jobId, s.state])).toEqual([[`theirs-${tag}`, 'running']]);
    expect(seen.sort()).toEqual([`mine-${tag}`, `theirs-${tag}`]);
    expect(probed).toHaveLength(1);
  });

  it('without one lists and probes every marker on the host', async () => {
    let probes = 0;
    const backend = new InProcessBackend({
      redis,
      root,
      registryKey,
      liveness: (pid, startTime) => {
        probes++;
        return isProcessAlive(pid, startTime);
      },
    });
    const listed = await backend.list();
    expect(listed.map((s) => s.jobId).sort()).toEqual([`mine-${tag}`, `theirs-${tag}`]);
    expect(listed.every((s) => s.state === 'running')).toBe(true);
    expect(probes).toBe(2);
  });

  it('probes no agent when the caller does not read the state (the reaper judges by record)', async () => {
    let probes = 0;
    const backend = new InProcessBackend({
      redis,
      root,
      registryKey,
      liveness: (pid, startTime) => {
        probes++;
        return isProcessAlive(pid, startTime);
      },
    });
    const listed = await backend.list({ state: false });
    expect(listed.map((s) => [s.jobId, s.state]).sort()).toEqual([
      [`mine-${tag}`, 'unknown'],
      [`theirs-${tag}`, 'unknown'],
    ]);
    expect(probes).toBe(0);
  });
});
