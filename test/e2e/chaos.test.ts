import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SERVICE_NAMES, type Stack, startStack } from '../helpers/services-stack.js';
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
      only: SERVICE_NAMES.filter((s) => s !== 'reaper'),
      env: {
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
    for (const name of stack.services.keys()) {
      await new Promise((r) => setTimeout(r, 2_500));
      await stack.crashAndRestart(name);
    }
    const records = await waitAll(stack.client, ids, 240_000);
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
  }, 300_000);
});
