import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, copyFile, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { pollUntil, statusKb, testRedisUrl } from '@sandstream/test-support';
import { decodeEventEntry, sandboxKeys } from '@sandstream/wire';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AGENT_BINARY_NAME,
  InjectError,
  injectFiles,
  isDynamicLoader,
  LOADER_NAME,
  locateAgentFiles,
  type ProcessFacts,
} from './inject.js';
import { deleteKeys, dropFromPageCache, seaCommand, startAgent, stopAgent } from './testing/agent-harness.js';

const run = promisify(execFile);
const sha256 = async (path: string) =>
  createHash('sha256')
    .update(await readFile(path))
    .digest('hex');
const REDIS_URL = testRedisUrl();
const agentDir = fileURLToPath(new URL('..', import.meta.url));

/** A fake build output: dist/sandstream-agent + dist/runtime/lib/{loader, libc}. */
async function fakeDist(root: string): Promise<{ binary: string; libDir: string }> {
  const libDir = join(root, 'runtime', 'lib');
  await mkdir(libDir, { recursive: true });
  const binary = join(root, AGENT_BINARY_NAME);
  await writeFile(binary, 'agent-v1');
  await writeFile(join(libDir, LOADER_NAME), 'loader');
  await writeFile(join(libDir, 'libc.so.6'), 'libc');
  await chmod(binary, 0o700);
  return { binary, libDir };
}

describe('locateAgentFiles', () => {
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'inject-locate-'));
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  const facts = (over: Partial<ProcessFacts>): ProcessFacts => ({
    execPath: '/usr/bin/node',
    argv0: 'node',
    cwd: root,
    env: {},
    isSea: true,
    ...over,
  });

  it('recognises glibc and musl loaders by name', () => {
    expect(isDynamicLoader('/shared/lib/ld-linux-x86-64.so.2')).toBe(true);
    expect(isDynamicLoader('/lib/ld-musl-x86_64.so.1')).toBe(true);
    expect(isDynamicLoader('/shared/sandstream-agent')).toBe(false);
    expect(isDynamicLoader('/usr/lib/libld-linux.so')).toBe(false);
  });

  it('uses execPath when the executable was started directly', async () => {
    const dist = await fakeDist(join(root, 'direct'));
    expect(locateAgentFiles(facts({ execPath: dist.binary, argv0: 'whatever' }))).toEqual(dist);
  });

  it('uses argv0 (relative to cwd) when started through the loader, and the loader directory for libs', async () => {
    const dir = join(root, 'loader');
    await mkdir(join(dir, 'lib'), { recursive: true });
    await writeFile(join(dir, AGENT_BINARY_NAME), 'agent');
    await writeFile(join(dir, 'lib', LOADER_NAME), 'loader');
    const found = locateAgentFiles(
      facts({ execPath: join(dir, 'lib', LOADER_NAME), argv0: `./${AGENT_BINARY_NAME}`, cwd: dir }),
    );
    expect(found).toEqual({ binary: join(dir, AGENT_BINARY_NAME), libDir: join(dir, 'lib') });
  });

  it('never mistakes the loader for the agent', async () => {
    const loader = join(root, 'loader', 'lib', LOADER_NAME);
    expect(() => locateAgentFiles(facts({ execPath: loader, argv0: loader }))).toThrow(
      /cannot find the agent executable/,
    );
  });

  it('refuses a plain node process with a message saying what to build', () => {
    expect(() => locateAgentFiles(facts({ isSea: false }))).toThrow(InjectError);
    expect(() => locateAgentFiles(facts({ isSea: false }))).toThrow(/single executable/);
  });

  it('honours SANDSTREAM_AGENT_BINARY and names the directories it searched for libraries', async () => {
    const dist = await fakeDist(join(root, 'env'));
    expect(locateAgentFiles(facts({ env: { SANDSTREAM_AGENT_BINARY: dist.binary }, isSea: false }))).toEqual(
      dist,
    );
    await rm(dist.libDir, { recursive: true });
    expect(() => locateAgentFiles(facts({ execPath: dist.binary }))).toThrow(
      /runtime libraries.*runtime\/lib/,
    );
  });
});

describe('injectFiles', () => {
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'inject-files-'));
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('lays out <dir>/sandstream-agent and <dir>/lib/*, executable by anyone, with no temp files left', async () => {
    const dist = await fakeDist(join(root, 'dist'));
    const target = join(root, 'shared');
    await injectFiles(dist, target);
    expect((await readdir(target)).sort()).toEqual(['lib', AGENT_BINARY_NAME]);
    expect((await readdir(join(target, 'lib'))).sort()).toEqual([LOADER_NAME, 'libc.so.6']);
    expect(await readFile(join(target, AGENT_BINARY_NAME), 'utf8')).toBe('agent-v1');
    for (const f of [AGENT_BINARY_NAME, `lib/${LOADER_NAME}`, 'lib/libc.so.6', 'lib', '.']) {
      expect((await stat(join(target, f))).mode & 0o777, f).toBe(0o755);
    }
  });

  it('replaces an existing injection in place (a re-run init container)', async () => {
    const dist = await fakeDist(join(root, 'dist2'));
    const target = join(root, 'shared2');
    await injectFiles(dist, target);
    await writeFile(dist.binary, 'agent-v2');
    await injectFiles(dist, target);
    expect(await readFile(join(target, AGENT_BINARY_NAME), 'utf8')).toBe('agent-v2');
    expect(await readdir(target)).toHaveLength(2);
  });

  it('rejects an empty target and injecting onto itself', async () => {
    const dist = await fakeDist(join(root, 'self'));
    await expect(injectFiles(dist, '')).rejects.toThrow(/target directory/);
    await expect(
      injectFiles({ ...dist, libDir: join(root, 'self', 'lib') }, join(root, 'self')),
    ).rejects.toThrow(/already runs from/);
  });
});

// The real thing: the built single executable (npm run build), started through its bundled
// loader exactly as a sandbox starts it. It injects itself, and the copy then runs a job against
// the real Redis as a non-root user.
describe('single executable --inject', () => {
  const built = join(agentDir, 'dist', AGENT_BINARY_NAME);
  const lib = join(agentDir, 'dist', 'runtime', 'lib');
  let root: string;
  let redis: Redis;
  beforeAll(async () => {
    if (!existsSync(built) || !existsSync(join(lib, LOADER_NAME))) {
      throw new Error(`${built} or its runtime/lib is missing: run "npm run build" first`);
    }
    root = await mkdtemp(join(tmpdir(), 'inject-sea-'));
    await chmod(root, 0o755); // the non-root run below must be able to traverse it
    redis = new Redis(REDIS_URL);
  });
  afterAll(async () => {
    await redis?.quit();
    await rm(root, { recursive: true, force: true });
  });

  it('copies itself and its runtime when started through the loader; the copy runs a job as nobody without leaking its libs into children', async () => {
    const [loader, ...loaderArgs] = seaCommand();
    await run(loader as string, [...loaderArgs, '--inject', join(root, 'shared')]);

    const shared = join(root, 'shared');
    const sharedBinary = join(shared, AGENT_BINARY_NAME);
    // Compared by digest: a deep equality over ~90 MB of bytes would take minutes.
    expect(await sha256(sharedBinary)).toBe(await sha256(built));
    expect((await readdir(join(shared, 'lib'))).sort()).toEqual((await readdir(lib)).sort());

    const jobId = `inject-test-${randomBytes(4).toString('hex')}`;
    const keys = sandboxKeys(jobId);
    try {
      const steps = [
        { schemaVersion: 1, stepId: 'maps', kind: 'run', command: 'cat', args: ['/proc/self/maps'] },
        { schemaVersion: 1, stepId: 'env', kind: 'run', command: 'env' },
        { schemaVersion: 1, stepId: 'bye', kind: 'shutdown' },
      ];
      for (const step of steps) await redis.lpush(keys.in, JSON.stringify(step));
      // Exits 0 only if the SEA found its blob through the loader and read --job-id from argv.
      await run(
        join(shared, 'lib', LOADER_NAME),
        [
          '--library-path',
          join(shared, 'lib'),
          sharedBinary,
          '--redis-url',
          REDIS_URL,
          '--job-id',
          jobId,
          '--workdir',
          '/tmp',
        ],
        { uid: 65534, gid: 65534, env: { PATH: '/usr/bin:/bin' }, timeout: 60_000 },
      );
      const lines = new Map<string, string[]>();
      // One entry may hold several events (a quick step's whole output): read them all.
      for (const [, fields] of await redis.xrange(keys.events, '-', '+')) {
        for (const event of decodeEventEntry(fields))
          if (event.kind === 'stdout' && event.line !== undefined)
            lines.set(event.stepId, [...(lines.get(event.stepId) ?? []), event.line]);
      }
      // The step (cat) mapped the host's own libc, nothing of the injected runtime.
      const maps = (lines.get('maps') ?? []).join('\n');
      expect(maps).toMatch(/libc\.so\.6/);
      expect(maps).not.toContain(shared);
      expect(lines.get('env')?.some((l) => l.startsWith('LD_LIBRARY_PATH='))).toBe(false);
      expect(await redis.llen(keys.results)).toBe(3);
    } finally {
      await redis.unlink(keys.in, keys.events, keys.results, keys.heartbeat, keys.control);
    }
  }, 90_000);

  it('writes the executable so that it maps no more file pages than the same file read back from disk', async () => {
    // A file's page-cache folios are sized by the writes that made it, and a process maps a
    // folio whole: the executable copied in large writes costs the agent megabytes of RSS that
    // the same file read back from disk does not (inject.ts, COPY_CHUNK_BYTES).
    const injected = join(root, 'small-writes');
    const [loader, ...loaderArgs] = seaCommand();
    await run(loader as string, [...loaderArgs, '--inject', injected]);
    const readBack = join(root, 'read-back');
    await mkdir(readBack);
    await copyFile(built, join(readBack, AGENT_BINARY_NAME));
    await chmod(join(readBack, AGENT_BINARY_NAME), 0o755);
    dropFromPageCache(join(readBack, AGENT_BINARY_NAME));

    // Both started through the build's loader: only the executable's page-cache state differs.
    const idleFileKb = async (dir: string) => {
      const agent = startAgent({ command: seaCommand(dir, lib) });
      try {
        await pollUntil('the first heartbeat', async () => (await redis.exists(agent.keys.heartbeat)) === 1, {
          timeoutMs: 20_000,
        });
        // What the boot touched is mapped by now; the rest of an idle second adds little.
        await new Promise((r) => setTimeout(r, 1_000));
        return statusKb(agent.child.pid as number, 'RssFile');
      } finally {
        await stopAgent(agent);
        await deleteKeys(redis, agent.keys);
      }
    };
    const fromDisk = await idleFileKb(readBack);
    const asInjected = await idleFileKb(injected);
    expect(asInjected).toBeLessThan(fromDisk + 1024);
  }, 90_000);
});
