import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_INPROCESS_REGISTRY_KEY } from '@sandstream/sandbox';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from '../helpers/services-stack.js';
import { waitAll } from './job-helpers.js';

// kill -9 each service type in turn while jobs are in flight, then restart it. Every step
// appends one line to its job's file, so a step that ran twice shows up as a duplicate line.
const scratch = mkdtempSync(join(tmpdir(), 'e2e-chaos-'));
const JOBS = 40;
const STEPS = 3;

describe('crash of any service mid-flight', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({
      label: 'chaos',
      env: {
        // Finished jobs are cleaned up seconds after the end, so the suite can check that nothing stays.
        REAPER_INTERVAL_SECONDS: '1',
        REAPER_RETENTION_SECONDS: '15',
        REAPER_ORPHAN_GRACE_SECONDS: '5',
        REAPER_SANDBOX_GRACE_SECONDS: '2',
        SCHEDULER_GLOBAL_SLOTS: '10',
        SCHEDULER_TENANT_SLOTS: '10',
        // Take over a dead dispatcher's notices quickly.
        CLAIM_IDLE_MS: '2000',
        LEASE_SECONDS: '10',
      },
    });
    mkdirSync(join(scratch, 'runs'), { recursive: true });
  });
  afterAll(async () => {
    await stack?.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  it('loses no job and runs no step twice', async () => {
    const ids: string[] = [];
    for (let i = 0; i < JOBS; i++) {
      const name = `c${i}`;
      const file = join(scratch, 'runs', name);
      const steps = Array.from({ length: STEPS }, (_, s) => ({
        command: `echo step-${s + 1} >> ${file}; sleep 0.5`,
        shell: true,
      }));
      ids.push((await stack.client.submit({ id: `${stack.namespace}-${name}`, image: 'none', steps })).jobId);
    }
    // Watch the jobs from the start: finished ones are reaped after the retention.
    const watching = waitAll(stack.client, ids, 240_000);
    for (const name of stack.services.keys()) {
      // Spacing the crashes in time is the chaos itself: each lands while jobs are in flight.
      await new Promise((r) => setTimeout(r, 2_500));
      await stack.crashAndRestart(name);
    }
    const records = await watching.catch((err: Error) => {
      throw new Error(
        `${err.message}\n${stack
          .logs()
          .split('\n')
          .filter((l) => /reap|delet|fail|error/i.test(l))
          .slice(-60)
          .join('\n')}`,
      );
    });
    expect(records.size).toBe(JOBS);
    const byState: Record<string, number> = {};
    for (const r of records.values()) byState[r.state] = (byState[r.state] ?? 0) + 1;
    console.log('chaos outcomes', byState);

    const files = new Set(readdirSync(join(scratch, 'runs')));
    for (let i = 0; i < JOBS; i++) {
      const name = `c${i}`;
      const lines = files.has(name)
        ? readFileSync(join(scratch, 'runs', name), 'utf8')
            .trim()
            .split('\n')
        : [];
      // No step ran twice, and steps ran in order.
      expect(lines, `job ${name}`).toEqual(
        lines.length ? Array.from({ length: lines.length }, (_, s) => `step-${s + 1}`) : [],
      );
      const record = records.get(ids[i] as string);
      if (record?.state === 'succeeded') expect(lines).toHaveLength(STEPS);
    }
    // Jobs may fail when their sandbox died with a crashed service, but most get through.
    expect(byState.succeeded ?? 0).toBeGreaterThanOrEqual(JOBS * 0.75);

    // After the reaper's retention: no key and no sandbox of any of these (finished) jobs remains.
    const leftovers = async () => {
      const found: string[] = [];
      for (const pattern of [
        `job:{${stack.namespace}-*}`,
        `sandbox:{${stack.namespace}-*}:*`,
        `dispatch:{${stack.namespace}-*}`,
      ]) {
        let cursor = '0';
        do {
          const [next, keys] = await stack.redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
          cursor = next;
          found.push(...keys);
        } while (cursor !== '0');
      }
      const sandboxes = Object.keys(await stack.redis.hgetall(DEFAULT_INPROCESS_REGISTRY_KEY)).filter((id) =>
        id.startsWith(`${stack.namespace}-`),
      );
      return [...found, ...sandboxes.map((id) => `sandbox process of ${id}`)];
    };
    await expect.poll(leftovers, { timeout: 60_000, interval: 1000 }).toEqual([]);
  }, 300_000);
});
