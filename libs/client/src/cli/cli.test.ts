import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createKeySpace, QueueNames } from '@sandstream/bus';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { redisUrl, repoRoot, uniqueNamespace } from '../../../../test/helpers/services.js';

// The built CLI as a user runs it (libs/client must be built: npx tsc -b libs/client).
const dir = mkdtempSync(join(tmpdir(), 'cli-'));
const namespace = uniqueNamespace('cli');
const redis = new Redis(redisUrl);

function cli(...args: string[]) {
  return spawnSync(process.execPath, [join(repoRoot, 'libs/client/dist/cli/main.js'), ...args], {
    env: { ...process.env, REDIS_URL: redisUrl, SANDSTREAM_NAMESPACE: namespace },
    encoding: 'utf8',
    timeout: 90_000,
  });
}

afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  redis.disconnect();
});

describe('sandstream CLI', () => {
  it('refuses an invalid job file with file, line, field and rule, exit 2, nothing queued', async () => {
    const file = join(dir, 'bad.yaml');
    writeFileSync(file, 'image: debian\nsteps:\n  - command: ""\n');
    const run = cli('submit', file);
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(/bad\.yaml:3:\d+: steps\.0\.command: command must not be empty/);
    const queue = new Queue(QueueNames.jobs, {
      connection: redis,
      prefix: createKeySpace(namespace).bullPrefix,
    });
    expect(await queue.count()).toBe(0);
    await queue.close();
  });

  it('submits a valid file and reports the job id; status shows it queued', () => {
    const file = join(dir, 'ok.yaml');
    writeFileSync(file, `id: ${namespace}-ok\nimage: debian\nsteps:\n  - command: "true"\n`);
    const run = cli('submit', file);
    expect(run.status).toBe(0);
    expect(run.stdout.trim()).toBe(`${namespace}-ok`);
    const status = cli('status', `${namespace}-ok`);
    expect(status.stdout).toMatch(/state\s+queued/);
    const again = cli('submit', file);
    expect(again.stderr).toMatch(/already submitted/);
  });

  it('cancels a queued job by its state change', () => {
    const file = join(dir, 'c.yaml');
    writeFileSync(file, `id: ${namespace}-c\nimage: debian\nsteps:\n  - command: "true"\n`);
    expect(cli('submit', file).status).toBe(0);
    expect(cli('cancel', `${namespace}-c`).status).toBe(0);
    const status = cli('status', `${namespace}-c`);
    expect(status.stdout).toMatch(/state\s+cancelled/);
    expect(status.status).toBe(130);
    expect(cli('ls', '--state', 'cancelled').stdout).toContain(`${namespace}-c`);
  });

  it('explains bad usage with exit 2', () => {
    expect(cli('frobnicate').status).toBe(2);
    expect(cli('ls', '--state', 'nope').stderr).toMatch(/--state must be one of/);
    expect(cli('status', 'no-such-job-xyz').status).toBe(2);
  });
});
