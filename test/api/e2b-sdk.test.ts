import { ApiKeyStore, createKeySpace } from '@sandstream/bus';
import { freePort } from '@sandstream/test-support';
import {
  CommandExitError,
  type FilesystemEvent,
  FilesystemEventType,
  NotFoundError,
  Sandbox,
  TimeoutError,
} from 'e2b';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type ApiStack, startApiStack } from '../helpers/api-stack.js';
import { rawRequest, textOf } from '../helpers/preview-fetch.js';

// The unmodified `e2b` SDK (issue 35) against the real api service and the services behind it:
// E2B_API_URL and E2B_SANDBOX_URL are the API's URL, E2B_API_KEY a Sandstream key. Another
// tenant's key finds none of its sandboxes.

let s: ApiStack;
let otherKey: string;
const saved = { ...process.env };

beforeAll(async () => {
  // NATS: the snapshot store a pause keeps the sandbox's files in.
  s = await startApiStack({
    label: 'e2b-sdk',
    env: { NATS_URL: process.env.NATS_URL ?? 'nats://127.0.0.1:4222' },
  });
  process.env.E2B_API_URL = s.url;
  process.env.E2B_SANDBOX_URL = s.url;
  process.env.E2B_API_KEY = (await s.key('acme')).key;
  otherKey = (await s.key('globex')).key;
}, 120_000);

afterAll(async () => {
  process.env = saved;
  await s?.stop();
}, 60_000);

describe('the e2b SDK against Sandstream', () => {
  let sbx: Sandbox;

  it('creates a sandbox from base with metadata and envs, and reads its info', async () => {
    sbx = await Sandbox.create({
      template: 'base',
      timeoutMs: 120_000,
      metadata: { suite: 'e2b-sdk' },
      envs: { GREETING: 'hi' },
    });
    expect(sbx.sandboxId).toMatch(/.+/);
    const info = await sbx.getInfo();
    expect(info.sandboxId).toBe(sbx.sandboxId);
    expect(info.metadata).toEqual({ suite: 'e2b-sdk' });
    expect(await sbx.isRunning()).toBe(true);
    await sbx.setTimeout(300_000);
  }, 120_000);

  it('runs commands: stdout as it comes, envs, the exit code as CommandExitError, timeouts', async () => {
    const seen: string[] = [];
    const ok = await sbx.commands.run('echo "$GREETING world"; echo oops >&2', {
      onStdout: (d) => void seen.push(d),
    });
    expect(ok.exitCode).toBe(0);
    expect(ok.stdout).toBe('hi world\n');
    expect(ok.stderr).toBe('oops\n');
    expect(seen.join('')).toBe('hi world\n');

    const failed = await sbx.commands.run('echo bad; exit 3').catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(CommandExitError);
    expect((failed as CommandExitError).exitCode).toBe(3);
    expect((failed as CommandExitError).stdout).toBe('bad\n');

    const slow = await sbx.commands.run('sleep 30', { timeoutMs: 1000 }).catch((e: unknown) => e);
    expect(slow).toBeInstanceOf(TimeoutError);
  }, 120_000);

  it('runs a command in the background: list, wait, kill', async () => {
    const handle = await sbx.commands.run('sleep 60', { background: true });
    expect(handle.pid).toBeGreaterThan(0);
    const listed = await sbx.commands.list();
    expect(listed.map((p) => p.pid)).toContain(handle.pid);
    expect(await sbx.commands.kill(handle.pid)).toBe(true);
    const ended = await handle.wait().catch((e: unknown) => e);
    expect(ended).toBeInstanceOf(CommandExitError);
    const followed = await sbx.commands.run('sleep 1; echo followed', { background: true });
    const again = await sbx.commands.connect(followed.pid);
    expect((await again.wait()).stdout).toBe('followed\n');
    const quick = await sbx.commands.run('echo later', { background: true });
    expect((await quick.wait()).stdout).toBe('later\n');
  }, 120_000);

  it('opens a PTY: keystrokes, resize, connect from elsewhere, exit code, kill; list shows it', async () => {
    const typed = (text: string) => new TextEncoder().encode(text);
    let out = '';
    const pty = await sbx.pty.create({
      cols: 80,
      rows: 24,
      timeoutMs: 120_000,
      onData: (d) => {
        out += Buffer.from(d).toString();
      },
    });
    expect(pty.pid).toBeGreaterThan(0);
    // The typed line is echoed as typed; only the shell's arithmetic prints 42.
    await sbx.pty.sendInput(pty.pid, typed('echo pty-$((6*7))\n'));
    await vi.waitUntil(() => out.includes('pty-42'), { timeout: 20_000, interval: 100 });
    await sbx.pty.resize(pty.pid, { cols: 123, rows: 45 });
    await sbx.pty.sendInput(pty.pid, typed('stty size\n'));
    await vi.waitUntil(() => out.includes('45 123'), { timeout: 20_000, interval: 100 });
    expect((await sbx.commands.list()).find((p) => p.pid === pty.pid)?.cmd).toBe('/bin/bash');

    let followed = '';
    const again = await sbx.pty.connect(pty.pid, {
      onData: (d) => {
        followed += Buffer.from(d).toString();
      },
    });
    await sbx.pty.sendInput(pty.pid, typed('echo seen-$((2+3))\n'));
    await vi.waitUntil(() => followed.includes('seen-5'), { timeout: 20_000, interval: 100 });
    await again.disconnect();

    await sbx.pty.sendInput(pty.pid, typed('exit 3\n'));
    const ended = await pty.wait().catch((e: unknown) => e);
    expect(ended).toBeInstanceOf(CommandExitError);
    expect((ended as CommandExitError).exitCode).toBe(3);

    const other = await sbx.pty.create({ cols: 80, rows: 24, timeoutMs: 120_000, onData: () => {} });
    expect(await sbx.pty.kill(other.pid)).toBe(true);
    expect(await other.wait().catch((e: unknown) => e)).toBeInstanceOf(CommandExitError);
    expect((await sbx.commands.list()).map((p) => p.pid)).not.toContain(other.pid);

    // A size no terminal has, and keystrokes to a command, are refused, naming what is wrong.
    await expect(sbx.pty.create({ cols: 5000, rows: 24, onData: () => {} })).rejects.toThrow(
      /pty\.size\.cols is at most 1000/,
    );
    const cmd = await sbx.commands.run('sleep 30', { background: true });
    await expect(sbx.pty.sendInput(cmd.pid, typed('x'))).rejects.toThrow(/is not a PTY/);
    await cmd.kill();
  }, 120_000);

  it("keeps a command's stdin open: sendStdin while it runs, closeStdin is its EOF", async () => {
    const seen: string[] = [];
    const reader = await sbx.commands.run('while read l; do echo "got $l"; done; echo eof', {
      background: true,
      stdin: true,
      onStdout: (d) => void seen.push(d),
    });
    await sbx.commands.sendStdin(reader.pid, 'one\n');
    // Read before the input ends: it reaches the command as it is sent.
    await vi.waitUntil(() => seen.join('').includes('got one'), { timeout: 20_000, interval: 100 });
    await reader.sendStdin(new TextEncoder().encode('two\n'));
    await reader.closeStdin();
    expect((await reader.wait()).stdout).toBe('got one\ngot two\neof\n');
    await expect(sbx.commands.sendStdin(reader.pid, 'late\n')).rejects.toThrow(/has ended/);

    const plain = await sbx.commands.run('sleep 30', { background: true });
    await expect(sbx.commands.sendStdin(plain.pid, 'x')).rejects.toThrow(/stdin is not open/);
    await plain.kill();
  }, 120_000);

  // Paths relative to the sandbox's directory: the in-process backend confines file calls to it,
  // not commands (stat, mkdir and rm are commands), so absolute paths would differ there.
  it('reads, writes, lists, stats, makes and removes files', async () => {
    await sbx.files.write('e2b-files/a.txt', 'alpha');
    expect(await sbx.files.read('e2b-files/a.txt')).toBe('alpha');
    const bytes = await sbx.files.read('e2b-files/a.txt', { format: 'bytes' });
    expect(Buffer.from(bytes).toString()).toBe('alpha');
    expect(await sbx.files.makeDir('e2b-files/sub')).toBe(true);
    expect(await sbx.files.makeDir('e2b-files/sub')).toBe(false);
    const names = (await sbx.files.list('e2b-files')).map((e) => `${e.name}:${e.type}`).sort();
    expect(names).toEqual(['a.txt:file', 'sub:dir']);
    expect(await sbx.files.exists('e2b-files/a.txt')).toBe(true);
    const stat = await sbx.files.getInfo('e2b-files/a.txt');
    expect([stat.type, stat.size]).toEqual(['file', 5]);
    await sbx.files.write([
      { path: 'e2b-files/m1.txt', data: 'one' },
      { path: 'e2b-files/m2.txt', data: 'two' },
    ]);
    await sbx.files.rename('e2b-files/m1.txt', 'e2b-files/sub/m1.txt');
    expect(await (await sbx.files.read('e2b-files/sub/m1.txt', { format: 'blob' })).text()).toBe('one');
    expect(await sbx.files.read('e2b-files/m2.txt')).toBe('two');
    await sbx.files.remove('e2b-files/a.txt');
    expect(await sbx.files.exists('e2b-files/a.txt')).toBe(false);
    await expect(sbx.files.read('e2b-files/a.txt')).rejects.toThrow(NotFoundError);
  }, 120_000);

  it('watches a directory: creates, writes and removes, below it with recursive; stop ends it', async () => {
    await sbx.files.makeDir('e2b-watch/sub');
    const seen: FilesystemEvent[] = [];
    const handle = await sbx.files.watchDir('e2b-watch', (e) => void seen.push(e), {
      recursive: true,
      timeoutMs: 60_000,
    });
    const saw = (name: string, type: FilesystemEventType) =>
      seen.some((e) => e.name === name && e.type === type);
    await sbx.commands.run('echo one > e2b-watch/a.txt; echo more >> e2b-watch/a.txt');
    await sbx.commands.run('echo two > e2b-watch/sub/b.txt && rm e2b-watch/a.txt');
    await vi.waitUntil(
      () => saw('a.txt', FilesystemEventType.REMOVE) && saw('sub/b.txt', FilesystemEventType.CREATE),
      {
        timeout: 20_000,
        interval: 100,
      },
    );
    expect(saw('a.txt', FilesystemEventType.CREATE)).toBe(true);
    expect(saw('a.txt', FilesystemEventType.WRITE)).toBe(true);
    await handle.stop();

    // Not recursive: the directory's own entries only.
    const flat: FilesystemEvent[] = [];
    const top = await sbx.files.watchDir('e2b-watch', (e) => void flat.push(e));
    await sbx.commands.run('echo three > e2b-watch/sub/c.txt; echo four > e2b-watch/d.txt');
    await vi.waitUntil(() => flat.some((e) => e.name === 'd.txt'), { timeout: 20_000, interval: 100 });
    expect(flat.some((e) => e.name.includes('c.txt'))).toBe(false);
    await top.stop();

    // includeEntry: each change carries the entry as it then is; a removal none.
    const withEntry: FilesystemEvent[] = [];
    const detailed = await sbx.files.watchDir('e2b-watch', (e) => void withEntry.push(e), {
      includeEntry: true,
    });
    await sbx.commands.run('printf 12345 > e2b-watch/e.txt && rm e2b-watch/d.txt');
    await vi.waitUntil(() => withEntry.some((e) => e.name === 'd.txt'), { timeout: 20_000, interval: 100 });
    const created = withEntry.find((e) => e.name === 'e.txt' && e.entry);
    expect(created?.entry).toMatchObject({ name: 'e.txt', type: 'file' });
    expect(withEntry.find((e) => e.name === 'd.txt')?.entry).toBeUndefined();
    await detailed.stop();
    // File metadata (which the SDK sends to envd 0.6.2 and later) is not kept: refused, naming it.
    await expect(sbx.files.write('e2b-watch/m.txt', 'x', { metadata: { owner: 'me' } })).rejects.toThrow(
      /files.write with metadata is not supported/,
    );

    await expect(sbx.files.watchDir('e2b-watch/none', () => {})).rejects.toThrow(/does not exist/);
  }, 120_000);

  it('lists by metadata, connects by id; another tenant finds nothing', async () => {
    const listed = await Sandbox.list({ query: { metadata: { suite: 'e2b-sdk' } } }).nextItems();
    expect(listed.map((l) => l.sandboxId)).toEqual([sbx.sandboxId]);
    expect(await Sandbox.list({ query: { metadata: { suite: 'other' } } }).nextItems()).toEqual([]);
    const again = await Sandbox.connect(sbx.sandboxId);
    expect((await again.commands.run('echo again')).stdout).toBe('again\n');

    const foreign = { apiKey: otherKey };
    await expect(Sandbox.connect(sbx.sandboxId, foreign)).rejects.toThrow(NotFoundError);
    await expect(Sandbox.getInfo(sbx.sandboxId, foreign)).rejects.toThrow(NotFoundError);
    expect(await Sandbox.kill(sbx.sandboxId, foreign)).toBe(false);
    // In-sandbox calls with the other tenant's key as their token (as a forged handle would
    // send them): the sandbox is not found there either.
    const forged: Sandbox = Reflect.construct(Sandbox, [
      {
        sandboxId: sbx.sandboxId,
        envdAccessToken: otherKey,
        envdVersion: '0.5.7',
        apiUrl: s.url,
        sandboxUrl: s.url,
      },
    ]);
    await expect(forged.files.read('e2b-files/m2.txt')).rejects.toThrow(NotFoundError);
    await expect(forged.commands.run('echo no')).rejects.toThrow(NotFoundError);
    expect(await Sandbox.list({ ...foreign, query: { metadata: { suite: 'e2b-sdk' } } }).nextItems()).toEqual(
      [],
    );
  }, 120_000);

  it("gives each sandbox an access token of its own: it opens that sandbox's calls, nothing else", async () => {
    const tokenOf = (x: Sandbox) => (x as unknown as { envdAccessToken: string }).envdAccessToken;
    const token = tokenOf(sbx);
    expect(token).toMatch(/^e2bs_/);
    expect(token).not.toBe(process.env.E2B_API_KEY);
    const other = await Sandbox.create({
      template: 'base',
      timeoutMs: 60_000,
      metadata: { suite: 'e2b-token' },
    });
    try {
      const handle = (sandboxId: string, envdAccessToken: string): Sandbox =>
        Reflect.construct(Sandbox, [
          { sandboxId, envdAccessToken, envdVersion: '0.5.7', apiUrl: s.url, sandboxUrl: s.url },
        ]);
      // Its own sandbox's calls, through a handle that knows nothing but the id and the token.
      expect((await handle(sbx.sandboxId, token).commands.run('echo by-token')).stdout).toBe('by-token\n');
      // Another sandbox of the same tenant: not found with this token, found with its own.
      await expect(handle(other.sandboxId, token).commands.run('echo no')).rejects.toThrow(NotFoundError);
      await expect(handle(other.sandboxId, token).files.read('e2b-files/m2.txt')).rejects.toThrow(
        NotFoundError,
      );
      expect((await handle(other.sandboxId, tokenOf(other)).commands.run('echo own')).stdout).toBe('own\n');
      // Not an API key: the control plane and our own API refuse it.
      await expect(Sandbox.getInfo(sbx.sandboxId, { apiKey: token })).rejects.toThrow(
        /401|access token|Unauthorized/i,
      );
      const v1 = await fetch(`${s.url}/v1/sandboxes`, { headers: { 'x-access-token': token } });
      expect(v1.status).toBe(401);
      const unknown = handle(sbx.sandboxId, 'e2bs_not-a-token');
      await expect(unknown.commands.run('echo no')).rejects.toThrow(/unknown or lapsed/);
    } finally {
      await other.kill();
    }
    // Revoking the key that opened a sandbox ends that sandbox's tokens.
    const extra = await s.key('acme');
    const opened = await Sandbox.create({ template: 'base', timeoutMs: 60_000, apiKey: extra.key });
    try {
      expect((await opened.commands.run('echo before')).stdout).toBe('before\n');
      await new ApiKeyStore({ redis: s.stack.redis, keys: createKeySpace(s.stack.namespace) }).revoke(
        extra.id,
      );
      await expect(opened.commands.run('echo after')).rejects.toThrow(/revoked/);
    } finally {
      await Sandbox.kill(opened.sandboxId);
    }
  }, 120_000);

  it('pages Sandbox.list by limit and x-next-token, newest first, within a metadata filter', async () => {
    const made: Sandbox[] = [];
    for (let i = 0; i < 3; i++)
      made.push(
        await Sandbox.create({ template: 'base', timeoutMs: 120_000, metadata: { suite: 'e2b-paging' } }),
      );
    try {
      const pages = Sandbox.list({ limit: 2, query: { metadata: { suite: 'e2b-paging' } } });
      const first = await pages.nextItems();
      expect(first).toHaveLength(2);
      expect(pages.hasNext).toBe(true);
      const second = await pages.nextItems();
      expect(pages.hasNext).toBe(false);
      const seen = [...first, ...second].map((l) => l.sandboxId);
      expect(seen).toEqual(made.map((m) => m.sandboxId).reverse());
      expect(first.every((l) => l.metadata.suite === 'e2b-paging')).toBe(true);
      await expect(Sandbox.list({ nextToken: 'not-ours' }).nextItems()).rejects.toThrow(/nextToken/);
    } finally {
      for (const m of made) await m.kill();
    }
  }, 120_000);

  it("getHost(port) is the sandbox's host-form preview: a server in the sandbox answers through it", async () => {
    const port = await freePort();
    const script = `require('http').createServer((q, r) => r.end('hello ' + q.url)).listen(${port})`;
    await sbx.commands.run(`${process.execPath} -e "${script}"`, { background: true });
    const host = sbx.getHost(port);
    expect(host.startsWith(`${port}-${sbx.sandboxId}.`)).toBe(true);
    const url = `http://${host}:${new URL(s.url).port}/from-e2b?x=1`;
    const headers = { authorization: `Bearer ${process.env.E2B_API_KEY}` };
    await vi.waitUntil(async () => (await rawRequest(url, { headers })).statusCode === 200, {
      timeout: 20_000,
      interval: 200,
    });
    expect(await textOf(await rawRequest(url, { headers }))).toBe('hello /from-e2b?x=1');
    // Another tenant's key does not open it.
    const foreign = await rawRequest(url, { headers: { authorization: `Bearer ${otherKey}` } });
    expect(foreign.statusCode).toBe(404);
  }, 60_000);

  it('getMetrics is one sample of stats(), now', async () => {
    const before = Date.now();
    const metrics = await sbx.getMetrics();
    expect(metrics).toHaveLength(1);
    const [m] = metrics;
    expect(m?.timestamp.getTime()).toBeGreaterThanOrEqual(before - 1000);
    expect(m?.diskUsed).toBeGreaterThan(0);
    expect(typeof m?.cpuUsedPct).toBe('number');
    await expect(Sandbox.getMetrics(sbx.sandboxId, { apiKey: otherKey })).rejects.toThrow(NotFoundError);
  }, 60_000);

  it('pauses, and Sandbox.connect resumes it with its files', async () => {
    await sbx.files.write('e2b-files/kept.txt', 'kept');
    expect(await sbx.pause()).toBe(true);
    expect((await sbx.getInfo()).state).toBe('paused');
    expect(
      (await Sandbox.list({ query: { metadata: { suite: 'e2b-sdk' }, state: ['paused'] } }).nextItems()).map(
        (l) => l.sandboxId,
      ),
    ).toEqual([sbx.sandboxId]);
    const resumed = await Sandbox.connect(sbx.sandboxId);
    expect((await resumed.getInfo()).state).toBe('running');
    expect(await resumed.files.read('e2b-files/kept.txt')).toBe('kept');
    expect((await resumed.commands.run('echo back')).stdout).toBe('back\n');
  }, 120_000);

  it('snapshots, and forks a sandbox with its files', async () => {
    const snap = await sbx.createSnapshot({ name: 'e2b-snap' });
    expect(snap.snapshotId).toMatch(/.+/);
    expect(snap.names).toEqual(['e2b-snap']);
    const [child] = await sbx.fork({ count: 1, timeoutMs: 60_000 });
    expect(child).toBeInstanceOf(Sandbox);
    const fork = child as Sandbox;
    try {
      expect(fork.sandboxId).not.toBe(sbx.sandboxId);
      expect(await fork.files.read('e2b-files/kept.txt')).toBe('kept');
    } finally {
      await fork.kill();
    }
  }, 120_000);

  it('lists snapshots by sandbox and name, creates a sandbox from one, deletes it', async () => {
    const snap = await sbx.createSnapshot({ name: 'e2b-listed' });
    const mine = await Sandbox.listSnapshots({ sandboxId: sbx.sandboxId }).nextItems();
    expect(mine.map((m) => m.snapshotId)).toContain(snap.snapshotId);
    const named = await Sandbox.listSnapshots({ name: 'e2b-listed' }).nextItems();
    expect(named).toEqual([{ snapshotId: snap.snapshotId, names: ['e2b-listed'] }]);

    const child = await Sandbox.create(snap.snapshotId, { timeoutMs: 60_000 });
    try {
      expect(child.sandboxId).not.toBe(sbx.sandboxId);
      expect(await child.files.read('e2b-files/kept.txt')).toBe('kept');
    } finally {
      await child.kill();
    }

    const foreign = { apiKey: otherKey };
    expect(await Sandbox.listSnapshots({ ...foreign, name: 'e2b-listed' }).nextItems()).toEqual([]);
    expect(await Sandbox.deleteSnapshot(snap.snapshotId, foreign)).toBe(false);
    await expect(Sandbox.create(snap.snapshotId, foreign)).rejects.toThrow(/not found/);
    expect(await Sandbox.deleteSnapshot(snap.snapshotId)).toBe(true);
    expect(await Sandbox.deleteSnapshot(snap.snapshotId)).toBe(false);
    expect(await Sandbox.listSnapshots({ name: 'e2b-listed' }).nextItems()).toEqual([]);
  }, 120_000);

  it('says which call it does not serve', async () => {
    await expect(sbx.updateNetwork({ denyOut: ['0.0.0.0/0'] })).rejects.toThrow(/network is not supported/);
  }, 60_000);

  it('kills the sandbox', async () => {
    await sbx.kill();
    expect(await sbx.isRunning()).toBe(false);
    expect(await Sandbox.kill(sbx.sandboxId)).toBe(false);
  }, 120_000);
});
