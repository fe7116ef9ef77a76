import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import { packTree, unpackTar } from '@sandstream/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiStack, startApiStack } from '../helpers/api-stack.js';
import { OpenApiDocument } from '../helpers/openapi-check.js';
import { apiClient, sseEvents } from './api-client.js';

// The HTTP API against the real services (processes, in-process backend, a private Redis),
// through a real HTTP client; every answer is checked against the OpenAPI document it serves.

let s: ApiStack;
let doc: OpenApiDocument;
let call: ReturnType<typeof apiClient>;
let acme: string;

interface Sandbox {
  id: string;
  state: string;
  tenant: string;
}
interface ExecResult {
  commandId: string;
  exitCode: number | null;
  stdout: string;
  stderr: string;
  cancelled: boolean;
}

// One small warm pool for any tenant and one reserved for another (min 0: nothing boots for it).
const templatesFile = join(mkdtempSync(join(tmpdir(), 'api-endpoints-')), 'templates.yaml');
writeFileSync(
  templatesFile,
  `templates:
  warm:
    image: debian:bookworm-slim
    pool: { min: 1, max: 2 }
  reserved:
    image: debian:bookworm-slim
    pool: { min: 0, max: 1 }
    tenants: [globex]
`,
);

beforeAll(async () => {
  s = await startApiStack({
    label: 'api-endpoints',
    env: { SANDSTREAM_TEMPLATES_FILE: templatesFile, POOL_KEEPER_INTERVAL_MS: '200' },
  });
  const res = await fetch(`${s.url}/openapi.json`);
  doc = await OpenApiDocument.load((await res.json()) as Record<string, unknown>);
  call = apiClient(s, doc);
  acme = (await s.key('acme')).key;
}, 120_000);

afterAll(async () => {
  await s?.stop();
  rmSync(dirname(templatesFile), { recursive: true, force: true });
}, 60_000);

describe('OpenAPI document', () => {
  it('is valid OpenAPI 3.1, generated from the libs’ zod schemas, and lists every endpoint', async () => {
    expect((doc.document as { openapi: string }).openapi).toBe('3.1.0');
    const paths = doc.paths;
    for (const expected of [
      'POST /v1/sandboxes',
      'GET /v1/sandboxes',
      'GET /v1/sandboxes/{id}',
      'DELETE /v1/sandboxes/{id}',
      'POST /v1/sandboxes/{id}/keepalive',
      'POST /v1/sandboxes/{id}/exec',
      'DELETE /v1/sandboxes/{id}/exec/{execId}',
      'GET /v1/sandboxes/{id}/history',
      'GET /v1/sandboxes/{id}/stats',
      'GET /v1/sandboxes/{id}/fs',
      'PUT /v1/sandboxes/{id}/fs',
      'GET /v1/sandboxes/{id}/ls',
      'GET /v1/sandboxes/{id}/grep',
      'POST /v1/sandboxes/{id}/archive',
      'GET /v1/sandboxes/{id}/archive',
      'POST /v1/sandboxes/{id}/processes',
      'GET /v1/sandboxes/{id}/processes',
      'DELETE /v1/sandboxes/{id}/processes/{pid}',
      'GET /v1/sandboxes/{id}/processes/{pid}/output',
      'POST /v1/sandboxes/{id}/processes/{pid}/stdin',
      'DELETE /v1/sandboxes/{id}/processes/{pid}/stdin',
      'POST /v1/sandboxes/{id}/watch',
      'GET /v1/sandboxes/{id}/shell',
      'GET /v1/sandboxes/{id}/events',
      'POST /v1/jobs',
      'GET /v1/jobs',
      'GET /v1/jobs/{id}',
      'DELETE /v1/jobs/{id}',
      'GET /v1/jobs/{id}/events',
      'GET /v1/templates',
      'DELETE /v1/templates/{name}',
      'GET /v1/pools',
      'GET /v1/queues',
      'POST /api/sandbox',
      'POST /api/sandbox/{id}/exec',
      'PUT /api/sandbox/{id}/fs',
    ]) {
      expect(paths).toContain(expected);
    }
    // The sandbox spec is the lib's LiveSandboxSpecSchema: its fields and rules, not a copy.
    const create = (
      doc.document.paths as Record<
        string,
        Record<
          string,
          {
            requestBody: {
              content: Record<string, { schema: { properties: Record<string, { maximum?: number }> } }>;
            };
          }
        >
      >
    )['/v1/sandboxes']?.post;
    const spec = create?.requestBody.content['application/json']?.schema;
    expect(spec?.properties.idleTimeoutSeconds?.maximum).toBe(24 * 3600);
    expect(Object.keys(spec?.properties ?? {})).toEqual(
      expect.arrayContaining(['template', 'image', 'env', 'labels', 'workingDirectory']),
    );
  });
});

describe('seed 003', () => {
  it("its curl lines, verbatim but for the port, work (the sandbox gets the operator's default image)", async () => {
    const port = new URL(s.url).port;
    const curl = (line: string) =>
      execFileSync(
        'sh',
        ['-c', `${line.replaceAll('localhost:5000', `localhost:${port}`)} -s -w '\\n%{http_code}'`],
        {
          encoding: 'utf8',
        },
      );
    const answer = (out: string) => {
      const lines = out.trimEnd().split('\n');
      const status = Number(lines.pop());
      return { status, body: JSON.parse(lines.join('\n')) as Record<string, unknown> };
    };
    const created = answer(
      curl(`curl -X POST http://localhost:5000/api/sandbox \\
  -H "Content-Type: application/json" \\
  -d '{"id": "my-sandbox"}'`),
    );
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ id: 'my-sandbox', state: 'ready', tenant: 'default' });
    expect(created.body.spec).toMatchObject({ image: 'debian:bookworm-slim' });

    const exec = answer(
      curl(`curl -X POST http://localhost:5000/api/sandbox/my-sandbox/exec \\
  -H "Content-Type: application/json" \\
  -d '{"command": "echo Hello World"}'`),
    );
    expect(exec.status).toBe(200);
    expect(exec.body).toMatchObject({ exitCode: 0, stdout: 'Hello World\n' });

    // The seed reads /hello.txt without writing it first: give it one, through its own PUT.
    const put = await call('PUT', '/api/sandbox/my-sandbox/fs', {
      json: { path: '/hello.txt', content: 'hi there\n' },
    });
    expect(put.status).toBe(200);
    const read = answer(curl('curl http://localhost:5000/api/sandbox/my-sandbox/fs?path=/hello.txt'));
    expect(read).toEqual({ status: 200, body: { path: '/hello.txt', content: 'hi there\n' } });

    const write = answer(
      curl(`curl -X PUT http://localhost:5000/api/sandbox/my-sandbox/fs \\
  -H "Content-Type: application/json" \\
  -d '{"path": "/data.json", "content": "{\\"key\\": \\"value\\"}"}'`),
    );
    expect(write).toEqual({ status: 200, body: { path: '/data.json', bytesWritten: 16 } });
    // `/` is the workspace: the seed's file is what a command there sees.
    const cat = await call<ExecResult>('POST', '/api/sandbox/my-sandbox/exec', {
      json: { command: 'cat data.json' },
    });
    expect(cat.body.stdout).toBe('{"key": "value"}\n');

    // The rest of its table: list, info, ls, history, stats, destroy.
    expect((await call<Sandbox[]>('GET', '/api/sandbox')).body.map((b) => b.id)).toContain('my-sandbox');
    expect((await call<Sandbox>('GET', '/api/sandbox/my-sandbox')).body.state).toBe('ready');
    const ls = await call<{ entries: { path: string }[] }>('GET', '/api/sandbox/my-sandbox/ls?path=/');
    expect(ls.body.entries.map((e) => e.path)).toEqual(expect.arrayContaining(['hello.txt', 'data.json']));
    const history = await call<{ command?: string }[]>('GET', '/api/sandbox/my-sandbox/history');
    expect(history.body.map((h) => h.command)).toContain('echo Hello World');
    const stats = await call<{ commandsRun: number }>('GET', '/api/sandbox/my-sandbox/stats');
    expect(stats.body.commandsRun).toBeGreaterThanOrEqual(4);
    const closed = await call<Sandbox>('DELETE', '/api/sandbox/my-sandbox');
    expect(closed.body.state).toBe('closed');
  }, 120_000);
});

describe('sandboxes', () => {
  it('create (and ?wait=false), get, list, exec as JSON and as SSE, cancel, keepalive, history, stats, events, close', async () => {
    const queued = await call<Sandbox>('POST', '/v1/sandboxes?wait=false', {
      key: acme,
      json: { labels: { suite: 'endpoints' } },
    });
    expect(queued.status).toBe(202);
    const id = queued.body.id;
    expect(queued.body.tenant).toBe('acme');
    await expect
      .poll(async () => (await call<Sandbox>('GET', `/v1/sandboxes/${id}`, { key: acme })).body.state, {
        timeout: 30_000,
      })
      .toBe('ready');
    const listed = await call<Sandbox[]>('GET', '/v1/sandboxes?labels=suite=endpoints&state=ready', {
      key: acme,
    });
    expect(listed.body.map((b) => b.id)).toEqual([id]);

    // JSON: argv with args, exit code and both streams.
    const json = await call<ExecResult>('POST', `/v1/sandboxes/${id}/exec`, {
      key: acme,
      json: { command: 'sh', args: ['-c', 'echo out; echo err >&2; exit 3'] },
    });
    expect(json.body).toMatchObject({ exitCode: 3, stdout: 'out\n', stderr: 'err\n' });

    // SSE: started (its id), each line, then the result.
    const res = await s.request(`/v1/sandboxes/${id}/exec`, {
      method: 'POST',
      key: acme,
      headers: { accept: 'text/event-stream', 'content-type': 'application/json' },
      body: JSON.stringify({ command: 'for i in 1 2 3; do echo line-$i; done' }),
    });
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const events = [];
    for await (const e of sseEvents(res)) events.push(e);
    expect(events.map((e) => e.event)).toEqual(['started', 'stdout', 'stdout', 'stdout', 'result']);
    expect(events.slice(1, 4).map((e) => (e.data as { line: string }).line)).toEqual([
      'line-1',
      'line-2',
      'line-3',
    ]);
    expect(events[4]?.data).toMatchObject({ exitCode: 0, stdout: 'line-1\nline-2\nline-3\n' });

    // Cancel from another request, by the id the stream announced.
    const long = await s.request(`/v1/sandboxes/${id}/exec`, {
      method: 'POST',
      key: acme,
      headers: { accept: 'text/event-stream', 'content-type': 'application/json' },
      body: JSON.stringify({ command: 'sleep 60' }),
    });
    const stream = sseEvents(long);
    const started = (await stream.next()).value as { event: string; data: { commandId: string } };
    expect(started.event).toBe('started');
    const cancel = await call('DELETE', `/v1/sandboxes/${id}/exec/${started.data.commandId}`, { key: acme });
    expect(cancel.status).toBe(202);
    let result: unknown;
    for await (const e of stream) if (e.event === 'result') result = e.data;
    expect(result).toMatchObject({ cancelled: true });

    expect((await call('POST', `/v1/sandboxes/${id}/keepalive`, { key: acme })).status).toBe(204);
    const history = await call<{ id: string; result?: unknown }[]>('GET', `/v1/sandboxes/${id}/history`, {
      key: acme,
    });
    expect(history.body.map((h) => h.id)).toContain(started.data.commandId);
    const stats = await call<{ commandsRun: number; workspaceFiles: number }>(
      'GET',
      `/v1/sandboxes/${id}/stats`,
      { key: acme },
    );
    expect(stats.body.commandsRun).toBeGreaterThanOrEqual(3);

    // Events: the sandbox's timeline from the start (created … running), then output.
    const controller = new AbortController();
    const timeline = await s.request(`/v1/sandboxes/${id}/events`, { key: acme, signal: controller.signal });
    const seen: string[] = [];
    for await (const e of sseEvents(timeline)) {
      seen.push(e.event === 'output' ? `output:${(e.data as { line: string }).line}` : e.event);
      if (seen.includes('output:line-3')) break;
    }
    controller.abort();
    expect(seen[0]).toBe('state');
    expect(seen).toContain('output:out');

    const closed = await call<Sandbox>('DELETE', `/v1/sandboxes/${id}`, { key: acme });
    expect(closed.body.state).toBe('closed');
    const refused = await call('POST', `/v1/sandboxes/${id}/exec`, { key: acme, json: { command: 'true' } });
    expect(refused.status).toBe(409);
  }, 120_000);

  it('files: write and read, ls, grep, tar up and down; background processes with their output as SSE', async () => {
    const { body: sandbox } = await call<Sandbox>('POST', '/v1/sandboxes', { key: acme, json: {} });
    const id = sandbox.id;
    const put = await call('PUT', `/v1/sandboxes/${id}/fs?path=notes/a.txt`, {
      key: acme,
      body: 'alpha\nbeta needle\n',
      headers: { 'content-type': 'text/plain' },
    });
    expect(put.body).toEqual({ path: 'notes/a.txt', bytesWritten: 18 });
    const bytes = await call('PUT', `/v1/sandboxes/${id}/fs?path=notes/b.bin`, {
      key: acme,
      body: new Uint8Array([0x6e, 0x65, 0x65, 0x64, 0x6c, 0x65, 0x0a]),
      headers: { 'content-type': 'application/octet-stream' },
    });
    expect(bytes.body).toEqual({ path: 'notes/b.bin', bytesWritten: 7 });
    const read = await call('GET', `/v1/sandboxes/${id}/fs?path=notes/a.txt`, { key: acme });
    expect(read.body).toBe('alpha\nbeta needle\n');
    const missing = await call<{ type: string }>('GET', `/v1/sandboxes/${id}/fs?path=nope.txt`, {
      key: acme,
    });
    expect(missing.status).toBe(404);
    const ls = await call<{ entries: { path: string }[] }>('GET', `/v1/sandboxes/${id}/ls?path=notes`, {
      key: acme,
    });
    expect(ls.body.entries.map((e) => e.path).sort()).toEqual(['a.txt', 'b.bin']);
    const grep = await call<{ matches: { path: string; line: number }[] }>(
      'GET',
      `/v1/sandboxes/${id}/grep?pattern=needle&path=notes&fixedStrings=true`,
      { key: acme },
    );
    expect(grep.body.matches.map((m) => `${m.path}:${m.line}`).sort()).toEqual(['a.txt:2', 'b.bin:1']);

    // A directory up as a tar stream, and back down.
    const local = mkdtempSync(join(tmpdir(), 'api-archive-'));
    mkdirSync(join(local, 'tree', 'sub'), { recursive: true });
    writeFileSync(join(local, 'tree', 'sub', 'c.txt'), 'gamma\n');
    const tar = await packTree(join(local, 'tree'));
    const chunks: Buffer[] = [];
    for await (const c of tar) chunks.push(c as Buffer);
    const up = await call<{ files: number }>('POST', `/v1/sandboxes/${id}/archive?path=up`, {
      key: acme,
      body: Buffer.concat(chunks),
      headers: { 'content-type': 'application/x-tar' },
    });
    expect(up.status).toBe(200);
    expect(up.body.files).toBeGreaterThanOrEqual(1);
    const down = await s.request(`/v1/sandboxes/${id}/archive?path=up/tree`, { key: acme });
    expect(down.headers.get('content-type')).toBe('application/x-tar');
    const out = join(local, 'out');
    mkdirSync(out);
    await unpackTar(Readable.fromWeb(down.body as import('node:stream/web').ReadableStream), out);
    expect(readFileSync(join(out, 'tree', 'sub', 'c.txt'), 'utf8')).toBe('gamma\n');

    // A background process: listed while it runs, its output followed, killed.
    const started = await call<{ id: string }>('POST', `/v1/sandboxes/${id}/processes`, {
      key: acme,
      json: { command: 'echo up; sleep 60' },
    });
    expect(started.status).toBe(201);
    const pid = started.body.id;
    const running = await call<{ id: string }[]>('GET', `/v1/sandboxes/${id}/processes`, { key: acme });
    expect(running.body.map((p) => p.id)).toContain(pid);
    const output = await s.request(`/v1/sandboxes/${id}/processes/${pid}/output`, { key: acme });
    const events = sseEvents(output);
    expect((await events.next()).value).toMatchObject({ event: 'stdout', data: { line: 'up' } });
    expect(
      (await call('DELETE', `/v1/sandboxes/${id}/processes/${pid}?signal=SIGKILL`, { key: acme })).status,
    ).toBe(202);
    let end: unknown;
    for await (const e of events) if (e.event === 'result') end = e.data;
    expect(end).toMatchObject({ cancelled: true });
    await call('DELETE', `/v1/sandboxes/${id}`, { key: acme });
  }, 120_000);
});

describe('jobs', () => {
  it('submit as JSON and as the YAML job file, list, get with step results, events, cancel', async () => {
    const submitted = await call<{ jobId: string; created: boolean }>('POST', '/v1/jobs', {
      key: acme,
      json: { steps: [{ command: 'echo', args: ['from json'] }] },
    });
    expect(submitted.status).toBe(201);
    const yaml = await call<{ jobId: string }>('POST', '/v1/jobs', {
      key: acme,
      body: 'steps:\n  - name: hi\n    command: sh\n    args: ["-c", "echo from yaml"]\n',
      headers: { 'content-type': 'application/yaml' },
    });
    expect(yaml.status).toBe(201);
    // Events until the end: the output line, then the terminal state.
    const res = await s.request(`/v1/jobs/${yaml.body.jobId}/events`, { key: acme });
    const lines: string[] = [];
    let last = '';
    for await (const e of sseEvents(res)) {
      if (e.event === 'output') lines.push((e.data as { line: string }).line);
      if (e.event === 'state') last = (e.data as { to: string }).to;
    }
    expect(lines).toEqual(['from yaml']);
    expect(last).toBe('succeeded');
    const job = await call<{ state: string; stepResults: Record<string, { exitCode: number }> }>(
      'GET',
      `/v1/jobs/${yaml.body.jobId}`,
      { key: acme },
    );
    expect(job.body.state).toBe('succeeded');
    expect(Object.values(job.body.stepResults).map((r) => r.exitCode)).toEqual([0]);
    const list = await call<{ id: string }[]>('GET', '/v1/jobs', { key: acme });
    expect(list.body.map((j) => j.id)).toEqual(
      expect.arrayContaining([submitted.body.jobId, yaml.body.jobId]),
    );

    // Pages: newest first, the next page's offset in a header.
    const first = await s.request('/v1/jobs?limit=1', { key: acme });
    expect(first.headers.get('x-next-offset')).toBe('1');
    const second = await s.request('/v1/jobs?limit=1&offset=1', { key: acme });
    const [a] = (await first.json()) as { id: string }[];
    const [b] = (await second.json()) as { id: string }[];
    expect([a?.id, b?.id]).toEqual(list.body.slice(0, 2).map((j) => j.id));

    const long = await call<{ jobId: string }>('POST', '/v1/jobs', {
      key: acme,
      json: { steps: [{ command: 'sleep', args: ['60'] }] },
    });
    expect((await call('DELETE', `/v1/jobs/${long.body.jobId}`, { key: acme })).status).toBe(202);
    await expect
      .poll(
        async () =>
          (await call<{ state: string }>('GET', `/v1/jobs/${long.body.jobId}`, { key: acme })).body.state,
        { timeout: 30_000 },
      )
      .toBe('cancelled');

    // A misspelt key in the YAML file is named with the nearest valid one, as the CLI words it.
    const bad = await call<{ errors: { field: string; rule: string }[] }>('POST', '/v1/jobs', {
      key: acme,
      body: 'steps:\n  - command: echo\n    contineOnError: true\n',
      headers: { 'content-type': 'application/yaml' },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.errors).toEqual([
      {
        field: 'body.steps.0.contineOnError',
        rule: 'unknown key "contineOnError" (did you mean "continueOnError"?)',
      },
    ]);
  }, 120_000);

  it('templates, pools and queues', async () => {
    const templates = await call<{ default: { image?: string } }>('GET', '/v1/templates', { key: acme });
    expect(templates.body.default.image).toBe('debian:bookworm-slim');
    // acme sees the pool open to all, filled to its min; not the one reserved for globex.
    await expect
      .poll(async () => (await call('GET', '/v1/pools', { key: acme })).body, { timeout: 60_000 })
      .toEqual([{ template: 'warm', min: 1, max: 2, starting: 0, ready: 1, hits: 0, misses: 0 }]);
    const admin = (await s.key('ops', true)).key;
    const all = await call<{ template: string; tenants?: string[] }[]>('GET', '/v1/pools', { key: admin });
    expect(all.body.map((p) => [p.template, p.tenants])).toEqual([
      ['warm', undefined],
      ['reserved', ['globex']],
    ]);
    const queues = await call<{ name: string }[]>('GET', '/v1/queues', { key: acme });
    expect(queues.body.map((q) => q.name)).toEqual(
      expect.arrayContaining(['jobs', 'dispatch', 'sandbox-create']),
    );
  });
});
