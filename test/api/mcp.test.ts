import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { scopedJobId } from '@sandstream/bus';
import { NatsServer, pollUntil, repoRoot } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiStack, startApiStack } from '../helpers/api-stack.js';
import {
  callTool,
  httpConnection,
  type McpConnection,
  sandstreamBin,
  stdioConnection,
} from './mcp-clients.js';

const run = promisify(execFile);

// Issue 34: any AI agent drives sandboxes through MCP. The official SDK's client against the real
// services, over stdio (`sandstream mcp`, the built CLI, on Redis) and over Streamable HTTP (the
// API's /mcp with a key): the same tools, answers and errors on both.

const TOOLS = [
  'close_sandbox',
  'create_sandbox',
  'get_preview_url',
  'grep',
  'list_files',
  'list_sandboxes',
  'read_file',
  'restore_snapshot',
  'run_code',
  'run_command',
  'snapshot_sandbox',
  'write_file',
];

const IDLE_SECONDS = 4;

let s: ApiStack;
let nats: NatsServer;
const keys = { acme: '', globex: '' };

beforeAll(async () => {
  nats = await NatsServer.start({ jetstream: true });
  s = await startApiStack({
    label: 'api-mcp',
    env: { NATS_URL: nats.url, LOG_ARCHIVE: 'off' },
    // Short, for the idle test; the SDK's client holds its GET stream open, which keeps a session alive.
    apiEnv: { API_MCP_SESSION_IDLE_SECONDS: String(IDLE_SECONDS) },
  });
  keys.acme = (await s.key('acme')).key;
  keys.globex = (await s.key('globex')).key;
}, 180_000);

afterAll(async () => {
  await s?.stop();
  await nats?.stop();
}, 120_000);

/** Each transport: how to connect, and the internal id of a sandbox id it answers (for the SDK's view). */
const transports = [
  {
    name: 'stdio',
    connect: () =>
      stdioConnection(['--image', 'debian:bookworm-slim'], {
        REDIS_URL: s.redisUrl,
        SANDSTREAM_NAMESPACE: s.stack.namespace,
      }),
    internal: (id: string) => id,
  },
  {
    name: 'http',
    connect: () => httpConnection(s.url, keys.acme),
    internal: (id: string) => scopedJobId('acme', id),
  },
] as const;

describe.each(transports)('MCP over $name', (transport) => {
  let mcp: McpConnection;
  let sandboxId = '';

  beforeAll(async () => {
    mcp = await transport.connect();
  }, 60_000);

  afterAll(async () => {
    await mcp?.disconnect();
  });

  it('lists every tool, each with its input and output schema', async () => {
    const { tools } = await mcp.client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(TOOLS);
    const run = tools.find((t) => t.name === 'run_command');
    expect(run?.inputSchema.required).toEqual(['sandboxId', 'command']);
    expect(run?.inputSchema.additionalProperties).toBe(false);
    expect(Object.keys(run?.outputSchema?.properties ?? {})).toEqual(
      expect.arrayContaining(['exitCode', 'stdout', 'stderr']),
    );
  });

  it('runs code in a stateful interpreter: state kept, main result, output, traceback, contexts apart', async () => {
    // The host's Debian python3 (a pyenv one comes first on PATH here).
    const created = await callTool(mcp.client, 'create_sandbox', {
      env: { SANDSTREAM_PYTHON: '/usr/bin/python3' },
    });
    expect(created.isError, created.text).toBe(false);
    const id = created.structured.sandboxId as string;
    expect((await callTool(mcp.client, 'run_code', { sandboxId: id, code: 'x = 40' })).isError).toBe(false);
    const ran = await callTool(mcp.client, 'run_code', { sandboxId: id, code: "print('hi')\nx + 2" });
    expect(ran.isError, ran.text).toBe(false);
    expect(ran.structured).toMatchObject({
      context: 'default-python',
      stdout: 'hi\n',
      results: [{ text: '42', isMainResult: true }],
      stateLost: false,
      timedOut: false,
    });
    expect(ran.text).toBe('hi\n\n42');
    const raised = await callTool(mcp.client, 'run_code', { sandboxId: id, code: '1 / 0' });
    expect(raised.structured.error).toMatchObject({ name: 'ZeroDivisionError' });
    expect(raised.text).toContain('Traceback');
    const apart = await callTool(mcp.client, 'run_code', {
      sandboxId: id,
      code: "'x' in globals()",
      context: 'other',
    });
    expect(apart.structured.results).toEqual([{ text: 'False', isMainResult: true }]);
    const js = await callTool(mcp.client, 'run_code', {
      sandboxId: id,
      code: '[1, 2].length',
      language: 'javascript',
    });
    expect(js.structured.results).toEqual([{ text: '2', isMainResult: true }]);
    await callTool(mcp.client, 'close_sandbox', { sandboxId: id });
  });

  it('creates a sandbox, writes, runs (exit code, stderr), reads, lists and greps', async () => {
    const created = await callTool(mcp.client, 'create_sandbox', { labels: { suite: 'mcp' } });
    expect(created.isError, created.text).toBe(false);
    sandboxId = created.structured.sandboxId as string;
    expect(sandboxId).toMatch(/\S/);

    const wrote = await callTool(mcp.client, 'write_file', {
      sandboxId,
      path: 'notes/hello.txt',
      content: 'hello mcp\nsecond line\n',
    });
    expect(wrote.isError, wrote.text).toBe(false);
    expect(wrote.structured.bytesWritten).toBe(22);

    const ran = await callTool(mcp.client, 'run_command', {
      sandboxId,
      command: 'cat notes/hello.txt; echo oops >&2; exit 3',
    });
    // A non-zero exit is an answer, not an error.
    expect(ran.isError, ran.text).toBe(false);
    expect(ran.structured).toMatchObject({
      exitCode: 3,
      stdout: 'hello mcp\nsecond line\n',
      stderr: 'oops\n',
      timedOut: false,
    });
    expect(ran.text).toMatch(/^exit code 3/);

    const env = await callTool(mcp.client, 'run_command', {
      sandboxId,
      command: 'pwd; echo "$GREETING"',
      cwd: 'notes',
      env: { GREETING: 'hi there' },
    });
    expect(env.structured.stdout).toMatch(/\/notes\nhi there\n$/);

    const read = await callTool(mcp.client, 'read_file', { sandboxId, path: 'notes/hello.txt' });
    expect(read.isError, read.text).toBe(false);
    expect(read.structured.content).toBe('hello mcp\nsecond line\n');
    expect(read.text).toBe('hello mcp\nsecond line\n');

    const listed = await callTool(mcp.client, 'list_files', { sandboxId, path: '.', depth: 2 });
    expect(listed.isError, listed.text).toBe(false);
    expect(listed.structured.entries).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ path: 'notes/hello.txt', type: 'file', sizeBytes: 22 }),
      ]),
    );

    const grep = await callTool(mcp.client, 'grep', { sandboxId, pattern: 'sec.nd' });
    expect(grep.isError, grep.text).toBe(false);
    expect(grep.structured.matches).toEqual([
      expect.objectContaining({ path: 'notes/hello.txt', line: 2, text: 'second line' }),
    ]);

    const mine = await callTool(mcp.client, 'list_sandboxes', { labels: { suite: 'mcp' } });
    expect(mine.structured.sandboxes).toEqual([
      expect.objectContaining({ sandboxId, state: 'ready', createdByThisSession: true }),
    ]);
  }, 120_000);

  it('keeps the head and tail of long output and says what was cut', async () => {
    const ran = await callTool(mcp.client, 'run_command', { sandboxId, command: 'seq 1 100000' });
    expect(ran.isError, ran.text).toBe(false);
    const stdout = ran.structured.stdout as string;
    expect(stdout.startsWith('1\n2\n3\n')).toBe(true);
    expect(stdout.endsWith('99999\n100000\n')).toBe(true);
    expect(stdout).toMatch(/\[… \d+ bytes of output cut here/);
    // Most of the 588,895 bytes are cut; not an exact count: under load the sandbox's capped
    // output stream may already have dropped middle lines (a gap) that the tool never saw.
    expect(ran.structured.stdoutOmittedBytes as number).toBeGreaterThan(100_000);
    expect(stdout.length).toBeLessThan(40 * 1024);
  }, 60_000);

  it('a timeout is an error result that says so; the command is killed', async () => {
    const ran = await callTool(mcp.client, 'run_command', {
      sandboxId,
      command: 'echo before; sleep 30',
      timeoutSeconds: 1,
    });
    expect(ran.isError).toBe(true);
    expect(ran.structured).toMatchObject({ timedOut: true, stdout: 'before\n' });
    expect(ran.text).toMatch(/timed out after 1 s and was killed/);
  }, 60_000);

  it('sends progress while a command runs', async () => {
    const progress: { progress: number; message?: string | undefined }[] = [];
    const ran = await callTool(
      mcp.client,
      'run_command',
      { sandboxId, command: 'for i in 1 2 3 4; do echo tick $i; sleep 0.5; done' },
      { onprogress: (p) => progress.push(p) },
    );
    expect(ran.structured.exitCode).toBe(0);
    expect(progress.length).toBeGreaterThanOrEqual(2);
    expect(progress.some((p) => /tick \d|running for/.test(p.message ?? ''))).toBe(true);
    for (let i = 1; i < progress.length; i++)
      expect(progress[i]?.progress).toBeGreaterThan(progress[i - 1]?.progress ?? Number.POSITIVE_INFINITY);
  }, 60_000);

  it('an MCP cancellation kills the running command', async () => {
    const abort = new AbortController();
    const call = callTool(
      mcp.client,
      'run_command',
      { sandboxId, command: 'echo $$ > cancel.pid; exec sleep 60' },
      { signal: abort.signal },
    );
    call.catch(() => {});
    const pid = await pollUntil(
      'the command started',
      async () => {
        const read = await callTool(mcp.client, 'read_file', { sandboxId, path: 'cancel.pid' });
        return !read.isError && /^\d+\n$/.test(read.structured.content as string)
          ? (read.structured.content as string).trim()
          : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    abort.abort('the user stopped it');
    await expect(call).rejects.toThrow();
    await pollUntil(
      'the cancelled command killed',
      async () =>
        (
          await callTool(mcp.client, 'run_command', {
            sandboxId,
            command: `kill -0 ${pid} 2>/dev/null && echo alive || echo gone`,
          })
        ).structured.stdout === 'gone\n',
      { timeoutMs: 15_000, intervalMs: 200 },
    );
  }, 60_000);

  it('a malformed call and an unknown sandbox get error results naming the problem', async () => {
    const missing = await callTool(mcp.client, 'run_command', { sandboxId });
    expect(missing.isError).toBe(true);
    expect(missing.text).toMatch(/run_command/);
    expect(missing.text).toMatch(/command/);

    const misnamed = await callTool(mcp.client, 'run_command', { sandboxId, cmd: 'ls' });
    expect(misnamed.isError).toBe(true);
    expect(misnamed.text).toMatch(/cmd.*did you mean "command"/s);

    const badType = await callTool(mcp.client, 'list_files', { sandboxId, depth: 'deep' });
    expect(badType.isError).toBe(true);
    expect(badType.text).toMatch(/depth/);

    const unknown = await callTool(mcp.client, 'run_command', {
      sandboxId: 'no-such-sandbox',
      command: 'true',
    });
    expect(unknown.isError).toBe(true);
    expect(unknown.text).toMatch(/sandbox no-such-sandbox not found/);

    const noFile = await callTool(mcp.client, 'read_file', { sandboxId, path: 'nope.txt' });
    expect(noFile.isError).toBe(true);
    expect(noFile.text).toMatch(/nope\.txt/);
    // The server is still there after all of it.
    expect(
      (await callTool(mcp.client, 'run_command', { sandboxId, command: 'echo ok' })).structured.stdout,
    ).toBe('ok\n');
  }, 60_000);

  it('closes a sandbox; commands to it are refused after', async () => {
    const closed = await callTool(mcp.client, 'close_sandbox', { sandboxId });
    expect(closed.isError, closed.text).toBe(false);
    expect(['closing', 'closed']).toContain(closed.structured.state);
    const after = await callTool(mcp.client, 'run_command', { sandboxId, command: 'true' });
    expect(after.isError).toBe(true);
    expect(after.text).toMatch(new RegExp(`sandbox ${sandboxId} (is clos|not found)`));
  }, 60_000);

  it('closes the sandboxes it created when the client disconnects, except kept ones', async () => {
    const other = await transport.connect();
    const temp = (await callTool(other.client, 'create_sandbox', {})).structured.sandboxId as string;
    const kept = (await callTool(other.client, 'create_sandbox', { keep: true })).structured
      .sandboxId as string;
    expect(temp).toBeTruthy();
    expect(kept).toBeTruthy();
    await other.disconnect();
    await pollUntil(
      'the unkept sandbox closed',
      async () => (await s.stack.client.sandboxes.get(transport.internal(temp)))?.state === 'closed',
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    expect((await s.stack.client.sandboxes.get(transport.internal(kept)))?.state).toBe('ready');
    await s.stack.client.sandboxes.close(transport.internal(kept));
  }, 120_000);
});

describe('MCP tenants', () => {
  it("another tenant's key cannot touch the sandbox, over HTTP or through the CLI's --url", async () => {
    const acme = await httpConnection(s.url, keys.acme);
    const globexHttp = await httpConnection(s.url, keys.globex);
    const globexCli = await stdioConnection(['--url', s.url], { SANDSTREAM_API_KEY: keys.globex });
    try {
      const id = (await callTool(acme.client, 'create_sandbox', {})).structured.sandboxId as string;
      await callTool(acme.client, 'write_file', { sandboxId: id, path: 'secret.txt', content: 'acme only' });
      for (const [via, other] of [
        ['http', globexHttp],
        ['cli --url', globexCli],
      ] as const) {
        for (const [tool, args] of [
          ['run_command', { sandboxId: id, command: 'cat secret.txt' }],
          ['read_file', { sandboxId: id, path: 'secret.txt' }],
          ['write_file', { sandboxId: id, path: 'secret.txt', content: 'globex was here' }],
          ['list_files', { sandboxId: id }],
          ['grep', { sandboxId: id, pattern: 'acme' }],
          ['snapshot_sandbox', { sandboxId: id }],
          ['get_preview_url', { sandboxId: id, port: 8000 }],
          ['close_sandbox', { sandboxId: id }],
        ] as const) {
          const answer = await callTool(other.client, tool, args);
          expect(answer.isError, `${via} ${tool}: ${answer.text}`).toBe(true);
          expect(answer.text, `${via} ${tool}`).toMatch(new RegExp(`sandbox ${id} not found`));
          expect(answer.text).not.toMatch(/acme only/);
        }
        // Nor by the internal id it has in acme's scope.
        const internal = await callTool(other.client, 'read_file', {
          sandboxId: scopedJobId('acme', id),
          path: 'secret.txt',
        });
        expect(internal.isError, `${via}: ${internal.text}`).toBe(true);
        expect(internal.text).not.toMatch(/acme only/);
        const listed = await callTool(other.client, 'list_sandboxes', {});
        expect(
          (listed.structured.sandboxes as { sandboxId: string }[]).map((x) => x.sandboxId),
        ).not.toContain(id);
      }
      // Untouched: still acme's, still its content.
      const read = await callTool(acme.client, 'read_file', { sandboxId: id, path: 'secret.txt' });
      expect(read.structured.content).toBe('acme only');
    } finally {
      await globexCli.disconnect();
      await globexHttp.disconnect();
      await acme.disconnect();
    }
  }, 120_000);

  it('a request without a key, or with a session another key opened, is refused', async () => {
    const noKey = await fetch(`${s.url}/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        // Not from loopback's anonymous access: a wrong key.
        authorization: 'Bearer sk_wrong',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(noKey.status).toBe(401);

    const acme = await httpConnection(s.url, keys.acme);
    try {
      const sessionId = (acme.client.transport as { sessionId?: string } | undefined)?.sessionId;
      expect(sessionId).toBeTruthy();
      const stolen = await fetch(`${s.url}/mcp`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          authorization: `Bearer ${keys.globex}`,
          'mcp-session-id': sessionId as string,
          'mcp-protocol-version': '2025-06-18',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
      expect(stolen.status).toBe(404);
    } finally {
      await acme.disconnect();
    }
  }, 60_000);
});

/** One JSON-RPC message to /mcp by plain fetch: its answer (JSON, or the SSE event carrying it) and headers. */
async function rpc(
  message: Record<string, unknown>,
  headers: Record<string, string>,
): Promise<{ status: number; sessionId: string | null; body: Record<string, unknown> | undefined }> {
  const res = await fetch(`${s.url}/mcp`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...headers,
    },
    body: JSON.stringify({ jsonrpc: '2.0', ...message }),
  });
  const text = await res.text();
  const data = /^data: (.*)$/m.exec(text)?.[1] ?? (text.startsWith('{') ? text : undefined);
  return {
    status: res.status,
    sessionId: res.headers.get('mcp-session-id'),
    body: data ? (JSON.parse(data) as Record<string, unknown>) : undefined,
  };
}

describe('MCP sessions over HTTP', () => {
  it('a session with no request open for API_MCP_SESSION_IDLE_SECONDS ends and closes what it created', async () => {
    const auth = { authorization: `Bearer ${keys.acme}` };
    const init = await rpc(
      {
        id: 1,
        method: 'initialize',
        params: {
          protocolVersion: '2025-06-18',
          capabilities: {},
          clientInfo: { name: 'raw', version: '1' },
        },
      },
      auth,
    );
    expect(init.status).toBe(200);
    const session = {
      ...auth,
      'mcp-session-id': init.sessionId as string,
      'mcp-protocol-version': '2025-06-18',
    };
    expect((await rpc({ method: 'notifications/initialized' }, session)).status).toBe(202);
    const created = await rpc(
      { id: 2, method: 'tools/call', params: { name: 'create_sandbox', arguments: {} } },
      session,
    );
    const sandboxId = (created.body?.result as { structuredContent: { sandboxId: string } } | undefined)
      ?.structuredContent.sandboxId;
    if (!sandboxId) throw new Error(`create_sandbox answered ${JSON.stringify(created.body)}`);
    // A command longer than the idle limit does not end the session: it is a request still open.
    const long = await rpc(
      {
        id: 3,
        method: 'tools/call',
        params: {
          name: 'run_command',
          arguments: { sandboxId, command: `sleep ${IDLE_SECONDS + 2}; echo woke` },
        },
      },
      session,
    );
    expect(
      (long.body?.result as { structuredContent: { stdout: string } } | undefined)?.structuredContent.stdout,
    ).toBe('woke\n');
    // Then nothing: the session ends, and with it the sandbox.
    await pollUntil(
      'the idle session closed its sandbox',
      async () => (await s.stack.client.sandboxes.get(scopedJobId('acme', sandboxId)))?.state === 'closed',
      { timeoutMs: (IDLE_SECONDS + 30) * 1000, intervalMs: 250 },
    );
    const after = await rpc({ id: 4, method: 'tools/list' }, session);
    expect(after.status).toBe(404);
  }, 90_000);
});

describe('MCP snapshots and previews (HTTP)', () => {
  it('snapshots, restores and gives a preview URL', async () => {
    const mcp = await httpConnection(s.url, keys.acme);
    try {
      const sandboxId = (await callTool(mcp.client, 'create_sandbox', {})).structured.sandboxId as string;
      await callTool(mcp.client, 'write_file', { sandboxId, path: 'state.txt', content: 'v1' });
      const snap = await callTool(mcp.client, 'snapshot_sandbox', { sandboxId, name: 'before' });
      expect(snap.isError, snap.text).toBe(false);
      const snapshotId = snap.structured.snapshotId as string;
      expect(snap.structured.name).toBe('before');
      await callTool(mcp.client, 'write_file', { sandboxId, path: 'state.txt', content: 'v2' });
      await callTool(mcp.client, 'write_file', { sandboxId, path: 'added.txt', content: 'new' });
      const restored = await callTool(mcp.client, 'restore_snapshot', { sandboxId, snapshotId });
      expect(restored.isError, restored.text).toBe(false);
      expect(restored.structured.snapshotId).toBe(snapshotId);
      expect(
        (await callTool(mcp.client, 'read_file', { sandboxId, path: 'state.txt' })).structured.content,
      ).toBe('v1');
      expect((await callTool(mcp.client, 'read_file', { sandboxId, path: 'added.txt' })).isError).toBe(true);

      const unknown = await callTool(mcp.client, 'restore_snapshot', { sandboxId, snapshotId: 'snap-nope' });
      expect(unknown.isError).toBe(true);
      expect(unknown.text).toMatch(/snapshot snap-nope not found/);

      const preview = await callTool(mcp.client, 'get_preview_url', { sandboxId, port: 8000 });
      expect(preview.isError, preview.text).toBe(false);
      const url = new URL(preview.structured.url as string);
      expect(url.origin).toBe(s.url);
      expect(url.pathname).toBe(`/v1/sandboxes/${sandboxId}/proxy/8000/`);
      expect(url.searchParams.get('token')).toBeTruthy();
    } finally {
      await mcp.disconnect();
    }
  }, 120_000);
});

/** The MCP Inspector's CLI mode (the test workspace's devDependency), run as a user runs it: its JSON answer. */
async function inspector(args: string[]): Promise<Record<string, unknown>> {
  const { stdout } = await run('npx', ['--no-install', '@modelcontextprotocol/inspector', '--cli', ...args], {
    cwd: repoRoot,
    timeout: 90_000,
    maxBuffer: 16 * 1024 * 1024,
  });
  return JSON.parse(stdout) as Record<string, unknown>;
}

describe('the MCP Inspector (CLI mode)', () => {
  it('lists the tools and calls run_command over stdio (sandstream mcp) and over HTTP (/mcp)', async () => {
    const stdioServer = [
      '-e',
      `REDIS_URL=${s.redisUrl}`,
      '-e',
      `SANDSTREAM_NAMESPACE=${s.stack.namespace}`,
      '-e',
      'SANDSTREAM_NO_SNAPSHOT_WARNING=1',
      sandstreamBin,
      'mcp',
    ];
    const listed = await inspector([...stdioServer, '--method', 'tools/list']);
    expect((listed.tools as { name: string }[]).map((t) => t.name).sort()).toEqual(TOOLS);

    // Each Inspector run is a connection of its own: the sandbox is made beside it, so that it
    // outlives the run.
    const box = await s.stack.client.sandboxes.create({ image: 'debian:bookworm-slim' });
    try {
      const ran = await inspector([
        ...stdioServer,
        '--method',
        'tools/call',
        '--tool-name',
        'run_command',
        '--tool-arg',
        `sandboxId=${box.id}`,
        '--tool-arg',
        'command=echo from the inspector; echo to stderr >&2; exit 5',
      ]);
      expect(ran.isError ?? false).toBe(false);
      expect(ran.structuredContent).toMatchObject({
        exitCode: 5,
        stdout: 'from the inspector\n',
        stderr: 'to stderr\n',
      });
    } finally {
      await box.close();
    }

    const sandboxId = await s.createSandbox(keys.acme);
    const http = [`${s.url}/mcp`, '--transport', 'http', '--header', `Authorization: Bearer ${keys.acme}`];
    const overHttp = await inspector([...http, '--method', 'tools/list']);
    expect((overHttp.tools as { name: string }[]).map((t) => t.name).sort()).toEqual(TOOLS);
    const ranHttp = await inspector([
      ...http,
      '--method',
      'tools/call',
      '--tool-name',
      'run_command',
      '--tool-arg',
      `sandboxId=${sandboxId}`,
      '--tool-arg',
      'command=uname -s',
    ]);
    expect(ranHttp.structuredContent).toMatchObject({ exitCode: 0, stdout: 'Linux\n' });
  }, 240_000);
});
