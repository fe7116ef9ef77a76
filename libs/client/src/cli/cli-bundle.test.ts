import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, repoRoot, testRedisUrl, uniqueNamespace } from '@sandstream/test-support';
import { describe, expect, it } from 'vitest';

// The `sandstream` command npm links (package.json bin) starts from the CLI's start-up snapshot
// (scripts/build-cli.mjs, run by the package's build): every module loaded at build time rather
// than on each command (docs/benchmarks.md, "CLI start-up"). Needs `npm run build -w libs/client`.
const pkg = join(repoRoot, 'libs/client');
const bin = join(pkg, JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8')).bin.sandstream as string);

function sandstream(...args: string[]) {
  return spawnSync(bin, args, {
    env: { ...process.env, REDIS_URL: testRedisUrl(), SANDSTREAM_NAMESPACE: uniqueNamespace('clib') },
    encoding: 'utf8',
    timeout: 60_000,
  });
}

describe('the sandstream command', () => {
  it('is the launcher of a start-up snapshot the build made', () => {
    expect(bin).toMatch(/bin\/sandstream$/);
    expect(existsSync(join(pkg, 'dist/bundle/sandstream-cli.blob'))).toBe(true);
    // With strace on PATH one could see the blob read; the launcher's choice is checked directly.
    const trace = spawnSync('sh', ['-x', bin, '--help'], { encoding: 'utf8' });
    expect(trace.stderr).toMatch(/--snapshot-blob \S+sandstream-cli\.blob -- --help/);
  });

  it('runs every command from it: --help, a flag node itself knows, Redis, Lua scripts', () => {
    const help = sandstream('--help');
    expect(help.status, help.stderr).toBe(0);
    expect(help.stdout).toMatch(/^Usage: sandstream <command>/);
    // A job id that is not there: the SDK, ioredis and the exit codes all work from the snapshot.
    const missing = sandstream('status', 'no-such-job');
    expect(missing.stderr).toBe('sandstream: job no-such-job not found\n');
    expect(missing.status).toBe(4);
    // cancel runs bus' job-request-cancel Lua script, read from bus' src/lua beside its module.
    const cancel = sandstream('cancel', 'no-such-job');
    expect(cancel.status, cancel.stderr).toBe(4);
  });

  it('reaches the HTTP API with --url (node:http, loaded on first use, keeps its named exports)', async () => {
    const port = await freePort();
    const run = sandstream('sandbox', 'ls', '--url', `http://127.0.0.1:${port}`);
    // Not "import_node_http.Agent is not a constructor": the request was made, and refused.
    expect(run.stderr).toMatch(new RegExp(`cannot reach the API at http://127\\.0\\.0\\.1:${port}`));
    expect(run.status).toBe(3);
  });

  it('loads BullMQ, NATS and yaml only for the commands that use them', () => {
    // They are bundles of their own beside the CLI's, not carried by its start-up snapshot.
    const main = readFileSync(join(pkg, 'dist/bundle/sandstream-cli.cjs'), 'utf8');
    for (const name of ['bullmq', 'nats', 'yaml']) {
      expect(main.includes(`node_modules/${name}/`), `${name} in the main bundle`).toBe(false);
      expect(existsSync(join(pkg, `dist/bundle/sandstream-cli-${name}.cjs`))).toBe(true);
    }
    // NODE_DEBUG=module names every file node loads: a Redis command that queues nothing loads none.
    const loaded = (...args: string[]) => {
      const run = spawnSync(bin, args, {
        env: {
          ...process.env,
          NODE_DEBUG: 'module',
          REDIS_URL: testRedisUrl(),
          SANDSTREAM_NAMESPACE: uniqueNamespace('clib'),
        },
        encoding: 'utf8',
        timeout: 60_000,
      });
      return [...new Set(run.stderr.match(/sandstream-cli-[a-z]+\.cjs/g) ?? [])];
    };
    expect(loaded('status', 'no-such-job')).toEqual([]);
    // cancel queues a request: BullMQ loads then, and only BullMQ.
    expect(loaded('cancel', 'no-such-job')).toEqual(['sandstream-cli-bullmq.cjs']);
    // submit parses the job file (yaml) and queues it (BullMQ).
    const submitted = sandstream('submit', join(repoRoot, 'examples/hello.yaml'));
    expect(submitted.status, submitted.stderr).toBe(0);
  });

  it('loads the MCP SDK only for `sandstream mcp`', () => {
    const main = readFileSync(join(pkg, 'dist/bundle/sandstream-cli.cjs'), 'utf8');
    expect(main.includes('node_modules/@modelcontextprotocol/'), 'the MCP SDK in the main bundle').toBe(
      false,
    );
    const side = readFileSync(join(pkg, 'dist/bundle/sandstream-cli-mcp.cjs'), 'utf8');
    expect(side.includes('node_modules/@modelcontextprotocol/sdk/')).toBe(true);
    // Its stdin closed at once: the server starts from the side bundle, then ends.
    const run = spawnSync(bin, ['mcp'], {
      env: {
        ...process.env,
        NODE_DEBUG: 'module',
        REDIS_URL: testRedisUrl(),
        SANDSTREAM_NAMESPACE: uniqueNamespace('clib'),
      },
      input: '',
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toBe('');
    expect([...new Set(run.stderr.match(/sandstream-cli-[a-z]+\.cjs/g) ?? [])]).toEqual([
      'sandstream-cli-mcp.cjs',
    ]);
  });

  it('keeps the snapshot when the compiled files are rewritten unchanged, in any order (a turbo cache restore)', () => {
    // A restore writes every output anew: the compiled CLI can end up newer than its snapshot.
    const future = new Date(Date.now() + 60_000);
    for (const file of ['dist/cli/main.js', 'dist/.tsbuildinfo']) utimesSync(join(pkg, file), future, future);
    const help = sandstream('--help');
    expect(help.stderr).toBe('');
    expect(help.stdout).toMatch(/^Usage: sandstream <command>/);
    expect(help.status).toBe(0);
  });

  it('runs the modules, and says so, when the compiled CLI changed since its snapshot (a `tsc -b` alone)', () => {
    // tsc rewrites a package's build info whenever it emits there: a changed one is a changed CLI,
    // whatever the files' times say. Put back as it was after.
    const info = join(pkg, 'dist/.tsbuildinfo');
    const before = readFileSync(info);
    const past = new Date(Date.now() - 3_600_000);
    try {
      writeFileSync(info, Buffer.concat([before, Buffer.from('\n')]));
      utimesSync(info, past, past);
      utimesSync(join(pkg, 'dist/cli/main.js'), past, past);
      const missing = sandstream('status', 'no-such-job');
      expect(missing.stderr).toMatch(/start-up snapshot was built from other compiled files.*npm run build/);
      expect(missing.stderr).toMatch(/job no-such-job not found\n$/);
      expect(missing.status).toBe(4);
    } finally {
      writeFileSync(info, before);
    }
    expect(sandstream('--help').stderr).toBe('');
  });

  it('says so when it falls back to the modules because the snapshot is not for this node', () => {
    // A copy of the launcher in a package of its own, its blob made by another node binary.
    const dir = mkdtempSync(join(tmpdir(), 'sandstream-launcher-'));
    try {
      mkdirSync(join(dir, 'bin'));
      mkdirSync(join(dir, 'dist/cli'), { recursive: true });
      mkdirSync(join(dir, 'dist/bundle'));
      copyFileSync(bin, join(dir, 'bin/sandstream'));
      writeFileSync(join(dir, 'bin/sandstream.mjs'), "console.log('from modules', process.argv.slice(2));\n");
      writeFileSync(join(dir, 'dist/bundle/sandstream-cli.blob'), '');
      writeFileSync(join(dir, 'dist/bundle/sandstream-cli.blob.node'), '/elsewhere/bin/node\n');
      writeFileSync(join(dir, 'dist/cli/main.js'), '');
      const run = spawnSync('sh', [join(dir, 'bin/sandstream'), '--help'], { encoding: 'utf8' });
      expect(run.stdout).toBe("from modules [ '--help' ]\n");
      expect(run.stderr).toMatch(/start-up snapshot was built by another node binary.*npm run build/);
      // Through a symlink, as npm links the bin: the package is found from the link's target.
      symlinkSync(join(dir, 'bin/sandstream'), join(dir, 'linked'));
      expect(spawnSync(join(dir, 'linked'), ['a b'], { encoding: 'utf8' }).stdout).toBe(
        "from modules [ 'a b' ]\n",
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
