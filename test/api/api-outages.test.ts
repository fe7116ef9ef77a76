import { spawn, spawnSync } from 'node:child_process';
import diagnostics from 'node:diagnostics_channel';
import { connect } from 'node:net';
import { join } from 'node:path';
import { ProblemKinds, problemType } from '@sandstream/bus';
import { InfrastructureUnavailableError, JobNotFoundError, SandstreamClient } from '@sandstream/client';
import {
  freePort,
  type RedisServer,
  type RunningService,
  repoRoot,
  startRedisServer,
  startService,
} from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';
import { type ApiStack, startApiStack } from '../helpers/api-stack.js';

const cliPath = join(repoRoot, 'libs/client/dist/cli/main.js');

// The API (a process of its own) on a private redis-server that is stopped under it: it answers
// that the infrastructure is unavailable (503, Retry-After, a problem of its own kind), which the
// SDK over HTTP reads back as InfrastructureUnavailableError and the CLI turns into exit 3 (125
// for exec), as over Redis.
describe('the API while its Redis is down', () => {
  let redis: RedisServer;
  let api: RunningService;
  let url: string;
  beforeAll(async () => {
    redis = await startRedisServer();
    const port = await freePort();
    api = await startService('api', {
      REDIS_URL: redis.url,
      SANDSTREAM_NAMESPACE: 'api-outage',
      API_PORT: String(port),
      API_ANONYMOUS: 'loopback',
    });
    url = `http://127.0.0.1:${port}`;
  });
  afterAll(async () => {
    await api?.stop(5000);
    await redis?.stop();
  });

  it('answers 503 with Retry-After and an infrastructure-unavailable problem; SDK and CLI say so', async () => {
    const client = new SandstreamClient({ url });
    try {
      expect(await client.get('j-1')).toBeNull();
      // Declared on every route of the OpenAPI document.
      const doc = (await (await fetch(`${url}/openapi.json`)).json()) as {
        paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
      };
      expect(doc.paths['/v1/jobs/{id}']?.get?.responses).toHaveProperty('503');
      expect(doc.paths['/v1/sandboxes/{id}/exec']?.post?.responses).toHaveProperty('503');
      await redis.kill();

      const res = await fetch(`${url}/v1/jobs/j-1`);
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('5');
      expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(await res.json()).toMatchObject({
        type: problemType(ProblemKinds.infrastructureUnavailable),
        status: 503,
        detail: expect.stringMatching(/unavailable/),
      });

      await expect(client.get('j-1')).rejects.toBeInstanceOf(InfrastructureUnavailableError);
      await expect(client.sandboxes.handle('s-1').exec('true')).rejects.toBeInstanceOf(
        InfrastructureUnavailableError,
      );
      await expect(client.submit({ image: 'none', steps: [{ command: 'true' }] })).rejects.toBeInstanceOf(
        InfrastructureUnavailableError,
      );

      const cli = (...args: string[]) =>
        spawnSync(process.execPath, [cliPath, ...args], {
          env: { ...process.env, REDIS_URL: '', SANDSTREAM_URL: url },
          encoding: 'utf8',
          timeout: 60_000,
        });
      const status = cli('status', 'j-1');
      expect(status.stderr).toMatch(/^sandstream: Sandstream is unavailable/);
      expect(status.status).toBe(3);
      const exec = cli('exec', 's-1', '--', 'true');
      expect(exec.stderr).toMatch(/^sandstream: Sandstream is unavailable/);
      expect(exec.status).toBe(125);
    } finally {
      await client.close();
    }
  }, 90_000);

  it('a job follow over HTTP waits the 503s out and goes on once Redis is back', async () => {
    // Redis is still down (the test above). The follow's requests (node:http, as the SDK sends
    // event streams) are counted on their way out, so that Redis comes back only once it met a 503.
    let asked = 0;
    const count = (message: unknown) => {
      const { request } = message as { request: { path: string } };
      if (request.path.includes('/v1/jobs/never-there/events')) asked++;
    };
    diagnostics.subscribe('http.client.request.start', count);
    const client = new SandstreamClient({ url });
    try {
      const items: unknown[] = [];
      const followed = (async () => {
        for await (const item of client.follow('never-there')) items.push(item);
      })();
      followed.catch(() => {});
      await vi.waitUntil(() => asked >= 2, { timeout: 30_000, interval: 50 });
      await redis.start();
      // Reached once Redis answers: a job that does not exist, not an outage.
      await expect(followed).rejects.toBeInstanceOf(JobNotFoundError);
      expect(items).toEqual([]);
    } finally {
      diagnostics.unsubscribe('http.client.request.start', count);
      await client.close();
    }
  }, 90_000);
});

/** The bounds the stack's API runs with: short, so that the tests see them act. */
const BOUNDS = {
  API_HEADERS_TIMEOUT_MS: '1000',
  API_REQUEST_TIMEOUT_MS: '2000',
  API_MAX_OPEN_REQUESTS_PER_KEY: '3',
};

/**
 * A raw TCP client that sends `text` and then nothing: resolves, once the server closed the
 * connection, with what it answered and how long it held the connection (or after `limitMs`
 * with `closed: false`).
 */
function sendAndWait(
  port: number,
  text: string,
  limitMs = 30_000,
): Promise<{ answer: string; closed: boolean; heldMs: number }> {
  return new Promise((resolve) => {
    const started = Date.now();
    const socket = connect(port, '127.0.0.1', () => socket.write(text));
    let answer = '';
    socket.on('data', (chunk) => {
      answer += chunk.toString();
    });
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ answer, closed: false, heldMs: Date.now() - started });
    }, limitMs);
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ answer, closed: true, heldMs: Date.now() - started });
    });
  });
}

/** A slow client's request: headers naming a body of 1,000 bytes, then one byte of it. */
const PARTIAL_BODY =
  'POST /v1/jobs HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{';

// The four services and the API (in-process backend, private Redis) with short request bounds:
// slow clients are cut off, long answers are not; a replica killed under a command's stream
// does not lose the command.
describe('the API under slow clients and a killed replica', () => {
  let s: ApiStack;
  let port: number;
  let apiEnv: Record<string, string>;
  /** The replica that took over from the stack's own, once a test killed that one. */
  let replica: RunningService | undefined;
  /** A key of tenant `default`. */
  let key: string;
  /** The sandboxes the tests made, closed at the end (an in-process sandbox's agent outlives the stack). */
  const sandboxes: string[] = [];
  const createSandbox = async () => {
    const id = await s.createSandbox(key);
    sandboxes.push(id);
    return id;
  };
  beforeAll(async () => {
    s = await startApiStack({ label: 'api-outages', apiEnv: BOUNDS });
    key = (await s.key('default')).key;
    port = Number(new URL(s.url).port);
    apiEnv = {
      ...s.stack.env,
      REDIS_URL: s.redisUrl,
      API_PORT: String(port),
      API_ANONYMOUS: 'loopback',
      API_DEFAULT_IMAGE: 'debian:bookworm-slim',
      ...BOUNDS,
    };
  }, 120_000);
  afterAll(async () => {
    for (const id of sandboxes) await s.request(`/v1/sandboxes/${id}`, { method: 'DELETE', key });
    await replica?.stop(10_000);
    await s?.stop();
  }, 60_000);

  it('closes a request whose body never comes (408) and one whose headers never end', async () => {
    const body = await sendAndWait(port, PARTIAL_BODY);
    expect(body.closed).toBe(true);
    expect(body.answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(body.heldMs).toBeGreaterThanOrEqual(2000);
    const headers = await sendAndWait(port, 'GET /v1/jobs HTTP/1.1\r\nHost: api\r\nX-Slow: ');
    expect(headers.closed).toBe(true);
    expect(headers.answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(headers.heldMs).toBeGreaterThanOrEqual(1000);
  }, 60_000);

  it('bounds the requests a key holds open (429 past them), and frees them when they end', async () => {
    const slow = [1, 2, 3].map(() => sendAndWait(port, PARTIAL_BODY));
    // Each is counted once its headers are in, which the next requests wait for.
    await expect
      .poll(async () => (await fetch(`${s.url}/v1/jobs?limit=1`)).status, { timeout: 10_000 })
      .toBe(429);
    const refused = await fetch(`${s.url}/v1/jobs?limit=1`);
    expect(refused.status).toBe(429);
    expect(await refused.json()).toMatchObject({ type: 'urn:sandstream:problem:too-many-open-requests' });
    for (const ended of await Promise.all(slow)) expect(ended.answer).toMatch(/^HTTP\/1\.1 408 /);
    expect((await fetch(`${s.url}/v1/jobs?limit=1`)).status).toBe(200);

    // A WebSocket shell counts while it is open, and no longer once closed.
    const id = await createSandbox();
    const tickets: string[] = [];
    for (let i = 0; i < 3; i++) {
      const ticket = await s.request('/v1/auth/ws-ticket', { method: 'POST', key });
      expect(ticket.status).toBe(201);
      tickets.push(((await ticket.json()) as { ticket: string }).ticket);
    }
    const shells = await Promise.all(
      tickets.map(async (ticket) => {
        const socket = new WebSocket(
          `${s.url.replace('http', 'ws')}/v1/sandboxes/${id}/shell?ticket=${ticket}`,
        );
        await new Promise((resolve, reject) => {
          socket.once('open', resolve);
          socket.once('unexpected-response', (_req, res) => reject(new Error(`shell: ${res.statusCode}`)));
          socket.once('error', reject);
        });
        return socket;
      }),
    );
    expect((await s.request('/v1/jobs?limit=1', { key })).status).toBe(429);
    await Promise.all(
      shells.map((socket) => {
        const closed = new Promise((resolve) => socket.once('close', resolve));
        socket.close();
        return closed;
      }),
    );
    await expect
      .poll(async () => (await s.request('/v1/jobs?limit=1', { key })).status, { timeout: 10_000 })
      .toBe(200);
  }, 60_000);

  it('a command streamed (SSE) and one answered as JSON run on past the request bound', async () => {
    const client = new SandstreamClient({ url: s.url, apiKey: key });
    try {
      const sandbox = client.sandboxes.handle(await createSandbox());
      const lines: string[] = [];
      const streamed = await sandbox.exec('for i in 1 2 3 4 5; do echo tick $i; sleep 1; done', {
        onStdout: (line) => lines.push(line),
      });
      expect(streamed.exitCode).toBe(0);
      expect(lines).toEqual(['tick 1', 'tick 2', 'tick 3', 'tick 4', 'tick 5']);
      const json = await s.request(`/v1/sandboxes/${sandbox.id}/exec`, {
        method: 'POST',
        key,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ command: 'sleep 4; echo done' }),
      });
      expect(json.status).toBe(200);
      expect(await json.json()).toMatchObject({ exitCode: 0, stdout: 'done\n' });
    } finally {
      await client.close();
    }
  }, 90_000);

  /** Kills the API (-9) and starts another replica on its port: the same URL, another process. */
  async function replaceReplica(): Promise<void> {
    await (replica ?? s.api).kill9();
    replica = await startService('api', apiEnv);
  }
  const numbered = (count: number) => Array.from({ length: count }, (_, i) => `n ${i + 1}`);
  const COMMAND = (count: number) =>
    `for i in $(seq 1 ${count}); do echo n $i; sleep 0.2; done; echo bye >&2; exit 7`;

  it('the SDK over HTTP follows a command to its end through the next replica: every line once, its real exit code', async () => {
    const client = new SandstreamClient({ url: s.url, apiKey: key });
    let replaced: Promise<void> | undefined;
    try {
      const sandbox = client.sandboxes.handle(await createSandbox());
      const lines: string[] = [];
      const stderr: string[] = [];
      const result = await sandbox.exec(COMMAND(40), {
        onStdout: (line) => {
          lines.push(line);
          replaced ??= replaceReplica();
        },
        onStderr: (line) => stderr.push(line),
      });
      await replaced;
      expect(lines).toEqual(numbered(40));
      expect(stderr).toEqual(['bye']);
      expect(result).toMatchObject({ exitCode: 7, timedOut: false, cancelled: false });
      expect(result.stdout).toBe(
        numbered(40)
          .map((l) => `${l}\n`)
          .join(''),
      );
    } finally {
      await replaced;
      await client.close();
    }
  }, 120_000);

  it('a background process followed over HTTP is followed on through the next replica: every line once, its exit code', async () => {
    const client = new SandstreamClient({ url: s.url, apiKey: key });
    let replaced: Promise<void> | undefined;
    try {
      const sandbox = client.sandboxes.handle(await createSandbox());
      const proc = await sandbox.processes.start(COMMAND(40));
      const lines: string[] = [];
      const result = await proc.follow({
        onStdout: (line) => {
          lines.push(line);
          replaced ??= replaceReplica();
        },
      });
      await replaced;
      expect(lines).toEqual(numbered(40));
      expect(result.exitCode).toBe(7);
    } finally {
      await replaced;
      await client.close();
    }
  }, 120_000);

  it('the CLI exec rides through the replica killed under it and exits with the command code', async () => {
    const id = await createSandbox();
    const child = spawn(process.execPath, [cliPath, 'exec', id, '--', 'sh', '-c', COMMAND(40)], {
      env: { ...process.env, REDIS_URL: '', SANDSTREAM_URL: s.url, SANDSTREAM_API_KEY: key },
    });
    let stdout = '';
    let stderr = '';
    let replaced: Promise<void> | undefined;
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      replaced ??= replaceReplica();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve)).finally(
      () => replaced,
    );
    expect(stdout).toBe(
      numbered(40)
        .map((l) => `${l}\n`)
        .join(''),
    );
    expect(stderr).toBe('bye\n');
    expect(code).toBe(7);
  }, 120_000);
});
