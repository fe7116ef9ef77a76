import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { redisUrl, repoRoot, uniqueNamespace } from '../helpers/services.js';

// `npm start` as a user runs it: four services up, hello.yaml streamed, Ctrl-C stops all.
describe('npm start (scripts/start.mjs)', () => {
  it('starts the services, runs examples/hello.yaml and stops everything on SIGINT', async () => {
    const namespace = uniqueNamespace('start');
    const child = spawn(
      process.execPath,
      [join(repoRoot, 'scripts/start.mjs'), '--namespace', namespace, '--scale', 'dispatcher=2'],
      {
        cwd: repoRoot,
        env: {
          ...process.env,
          REDIS_URL: redisUrl,
          SANDBOX_TYPE: 'inprocess',
          SANDSTREAM_SKIP_BOOTSTRAP: '1',
        },
      },
    );
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      out += c.toString();
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    const deadline = Date.now() + 180_000;
    while (!out.includes('press Ctrl-C') && Date.now() < deadline && child.exitCode === null) {
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(out).toMatch(/✓ step-dispatcher#2 ready/);
    expect(out).toMatch(/▶ step-4 {2}find the greeting — grep: hello in hello/);
    expect(out).toContain('  │ hello from sandstream');
    expect(out).toMatch(/job finished \(sandstream exit code 0\)/);
    child.kill('SIGINT');
    expect(await exited).toBe(0);
    for (const name of ['scheduler', 'pod-lifecycle', 'step-dispatcher#1', 'step-dispatcher#2', 'reaper']) {
      expect(out).toContain(`  ${name}: exited 0`);
    }
  }, 240_000);
});
