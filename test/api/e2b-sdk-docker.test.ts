import { liveBackends } from '@sandstream/test-support';
import { type CommandExitError, type FilesystemEvent, FilesystemEventType, Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type ApiStack, startApiStack } from '../helpers/api-stack.js';

// The unmodified `e2b` SDK on the Docker backend (issue 35): `base` is the operator's default
// image; commands and file calls see the same absolute paths in the container.
const docker = liveBackends().find((b) => b.name === 'docker');
const DEFAULT_IMAGE = docker?.image ?? 'sandstream/debian:bookworm';

let s: ApiStack;
let key: string;

describe.skipIf(!docker)('the e2b SDK on Docker', () => {
  beforeAll(async () => {
    s = await startApiStack({
      label: 'e2b-docker',
      env: docker?.env ?? {},
      apiEnv: { API_DEFAULT_IMAGE: DEFAULT_IMAGE },
    });
    key = (await s.key('acme')).key;
  }, 180_000);

  afterAll(async () => {
    await s?.stop();
  }, 120_000);

  it('create, run, files on absolute paths, kill', async () => {
    const opts = { apiKey: key, apiUrl: s.url, sandboxUrl: s.url };
    const sbx = await Sandbox.create('base', { ...opts, timeoutMs: 120_000 });
    try {
      expect((await sbx.commands.run('cat /etc/os-release | head -1')).stdout).toMatch(/Debian/);
      const failed = await sbx.commands.run('exit 7').catch((e: unknown) => e);
      expect((failed as CommandExitError).exitCode).toBe(7);
      await sbx.files.write('/tmp/e2b/a.txt', 'alpha');
      expect(await sbx.files.makeDir('/tmp/e2b/sub')).toBe(true);
      expect((await sbx.files.list('/tmp/e2b')).map((e) => `${e.name}:${e.type}`).sort()).toEqual([
        'a.txt:file',
        'sub:dir',
      ]);
      expect((await sbx.commands.run('cat /tmp/e2b/a.txt')).stdout).toBe('alpha\n');
      await sbx.files.remove('/tmp/e2b');
      expect(await sbx.files.exists('/tmp/e2b/a.txt')).toBe(false);
    } finally {
      await sbx.kill();
    }
    expect(await sbx.isRunning()).toBe(false);
  }, 180_000);

  it('an open stdin, a PTY and a recursive watch inside the container', async () => {
    const opts = { apiKey: key, apiUrl: s.url, sandboxUrl: s.url };
    const sbx = await Sandbox.create('base', { ...opts, timeoutMs: 120_000 });
    try {
      const reader = await sbx.commands.run('while read l; do echo "got $l"; done', {
        background: true,
        stdin: true,
      });
      await reader.sendStdin('one\n');
      await reader.closeStdin();
      expect((await reader.wait()).stdout).toBe('got one\n');

      let out = '';
      const pty = await sbx.pty.create({
        cols: 80,
        rows: 24,
        onData: (d) => {
          out += Buffer.from(d).toString();
        },
      });
      await sbx.pty.sendInput(pty.pid, new TextEncoder().encode('echo tty-$((40+2)) $(tty)\n'));
      await vi.waitUntil(() => /tty-42 \/dev\/pts\//.test(out), { timeout: 20_000, interval: 100 });
      await sbx.pty.kill(pty.pid);

      await sbx.files.makeDir('/tmp/watched');
      const seen: FilesystemEvent[] = [];
      const watch = await sbx.files.watchDir('/tmp/watched', (e) => void seen.push(e), { recursive: true });
      await sbx.commands.run('mkdir /tmp/watched/d && sleep 1 && echo x > /tmp/watched/d/f.txt');
      await vi.waitUntil(
        () => seen.some((e) => e.name === 'd/f.txt' && e.type === FilesystemEventType.CREATE),
        {
          timeout: 20_000,
          interval: 100,
        },
      );
      await watch.stop();
    } finally {
      await sbx.kill();
    }
  }, 180_000);
});
