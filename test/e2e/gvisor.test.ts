import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Dockerode from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from '../helpers/services-stack.js';
import { outputLines } from './job-helpers.js';

// A job with every job step kind, and a live sandbox's exec and stats, through the four services, on the Docker backend
// with `runtimeClass: gvisor` from a template. Outside CI an engine without runsc skips this with
// the reason; under CI=true it runs (npm test's bootstrap installs and registers runsc).
const image = process.env.SANDSTREAM_TEST_IMAGE_BUSYBOX ?? 'sandstream/busybox:static';
const ci = process.env.CI === 'true';
const runtimes = await new Dockerode()
  .info()
  .then((info: { Runtimes?: Record<string, unknown> }) => Object.keys(info.Runtimes ?? {}))
  .catch(() => [] as string[]);
const skip = !ci && !runtimes.includes('runsc');
if (skip) process.stderr.write('\n*** SKIPPING gvisor e2e: no Docker engine with the runsc runtime ***\n\n');

describe.skipIf(skip)('gVisor sandboxes through the services (Docker backend)', () => {
  let stack: Stack;
  beforeAll(async () => {
    const templates = join(mkdtempSync(join(tmpdir(), 'sandstream-gvisor-')), 'templates.yaml');
    writeFileSync(templates, `templates:\n  gvisor:\n    image: ${image}\n    runtimeClass: gvisor\n`);
    stack = await startStack({
      label: 'gvisor',
      env: {
        SANDBOX_TYPE: 'docker',
        SANDSTREAM_TEMPLATES_FILE: templates,
        // The shared test Redis: loopback only, open `default` user (isolation: docker-reach.test.ts).
        SANDSTREAM_DOCKER_NETWORK: 'host',
        SANDSTREAM_ALLOW_OPEN_REDIS: '1',
      },
    });
  }, 60_000);
  afterAll(async () => {
    await stack?.stop();
  });

  it('runs a job with every step kind, and a live sandbox exec and stats, inside gVisor', async () => {
    const ns = stack.namespace;
    const live = stack.client.sandboxes.create({ id: `${ns}-live`, template: 'gvisor' });
    const job = await stack.client.submit({
      id: `${ns}-job`,
      template: 'gvisor',
      steps: [
        { command: 'uname', args: ['-r'] },
        { kind: 'writeFile', path: 'g/a.txt', content: 'inside gvisor\n' },
        { kind: 'readFile', path: 'g/a.txt' },
        { kind: 'listFiles', path: 'g' },
        { kind: 'grep', pattern: 'gvisor', path: 'g' },
      ],
    });
    const r = await stack.client.wait(job.jobId, { timeoutMs: 60_000 });
    expect(r.state, r.reason).toBe('succeeded');
    // gVisor's Sentry reports its own kernel release, whatever the host runs.
    expect(await outputLines(stack.client, job.jobId)).toEqual(['step-1:4.4.0']);
    expect(r.stepResults['step-3']?.output).toMatchObject({ content: 'inside gvisor\n' });
    expect(r.stepResults['step-4']?.output).toMatchObject({ entries: [{ path: 'a.txt', type: 'file' }] });
    expect(r.stepResults['step-5']?.output).toMatchObject({ matches: [{ path: 'a.txt', line: 1 }] });

    const sandbox = await live;
    try {
      const uname = await sandbox.exec(['uname', '-r']);
      expect(uname).toMatchObject({ exitCode: 0, stdout: '4.4.0\n' });
      // stats is a live sandbox's step (jobs have no such step kind).
      expect(await sandbox.stats()).toMatchObject({ workspaceFiles: 0 });
    } finally {
      await sandbox.close();
    }
  }, 120_000);
});
