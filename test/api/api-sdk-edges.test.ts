import { createHash, randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { type AddressInfo, connect, createServer } from 'node:net';
import { Readable } from 'node:stream';
import { type Sandbox, SandstreamClient } from '@sandstream/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiStack, startApiStack } from '../helpers/api-stack.js';

// Rough edges a new user hit (issue 33), each through the SDK over both transports where the SDK
// is involved, and through the API over HTTP for the API's own answers.

let s: ApiStack;
let key: string;
let http: SandstreamClient;
const clients = (): Record<'redis' | 'http', SandstreamClient> => ({ redis: s.stack.client, http });
const made: Sandbox[] = [];

beforeAll(async () => {
  s = await startApiStack({ label: 'api-sdk-edges' });
  key = (await s.key('acme')).key;
  http = new SandstreamClient({ url: s.url, apiKey: key });
}, 120_000);

afterAll(async () => {
  for (const sb of made) await sb.close().catch(() => {});
  await http?.close();
  await s?.stop();
}, 60_000);

async function sandbox(client: SandstreamClient): Promise<Sandbox> {
  const sb = await client.sandboxes.create({ tenant: 'acme', image: 'debian:bookworm-slim' });
  made.push(sb);
  return sb;
}

describe.each(['redis', 'http'] as const)('SDK over %s', (transport) => {
  it('exec answers a real Promise (catch, finally, instanceof) that still streams its lines', async () => {
    const sb = await sandbox(clients()[transport]);
    const execution = sb.exec('true');
    expect(execution).toBeInstanceOf(Promise);
    let finished = false;
    const result = await execution
      .catch(() => {
        throw new Error('unexpected');
      })
      .finally(() => {
        finished = true;
      });
    expect(result.exitCode).toBe(0);
    expect(finished).toBe(true);

    const lines: string[] = [];
    const streamed = sb.exec(['sh', '-c', 'echo one; echo two']);
    for await (const item of streamed) if (item.stream === 'stdout') lines.push(item.line);
    expect(lines).toEqual(['one', 'two']);
    expect((await streamed).stdout).toBe('one\ntwo\n');
    expect(
      await Promise.all([sb.exec('echo a'), sb.exec('echo b')]).then((r) => r.map((x) => x.stdout)),
    ).toEqual(['a\n', 'b\n']);

    // A refusal is caught by .catch.
    await sb.close();
    const caught = await sb.exec('true').catch((err: Error) => err.name);
    expect(caught).toBe('SandboxClosedError');
  }, 60_000);

  it('a follow stopped with stopFollowing ends quietly, with what it saw; the process goes on', async () => {
    const sb = await sandbox(clients()[transport]);
    const proc = await sb.processes.start(['sh', '-c', 'echo first; sleep 60']);
    const stop = new AbortController();
    const follow = proc.follow({ stopFollowing: stop.signal });
    const seen: string[] = [];
    for await (const item of follow) {
      if (item.stream === 'stdout') seen.push(item.line);
      if (seen.includes('first')) stop.abort();
    }
    const result = await follow;
    expect(seen).toEqual(['first']);
    expect(result).toMatchObject({
      commandId: proc.id,
      exitCode: null,
      stillRunning: true,
      stdout: 'first\n',
    });
    // Still running: listed, and killable.
    expect((await sb.processes.list()).map((p) => p.id)).toContain(proc.id);
    await proc.kill('SIGKILL');
  }, 60_000);
});

describe.each(['redis', 'http'] as const)('binary files over %s', (transport) => {
  const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
  const collect = async (stream: AsyncIterable<Uint8Array>) => {
    const chunks: Buffer[] = [];
    for await (const c of stream) chunks.push(Buffer.from(c));
    return Buffer.concat(chunks);
  };

  it('every byte value round-trips as bytes and as a stream; text refuses it', async () => {
    const sb = await sandbox(clients()[transport]);
    const all = Uint8Array.from({ length: 256 }, (_, i) => i);
    expect(await sb.files.write('bin/all.bin', all)).toBe(256);
    const bytes = await sb.files.read('bin/all.bin', { format: 'bytes' });
    expect(Buffer.from(bytes).equals(Buffer.from(all))).toBe(true);
    const streamed = await collect(await sb.files.read('bin/all.bin', { format: 'stream' }));
    expect(streamed.equals(Buffer.from(all))).toBe(true);
    await expect(sb.files.read('bin/all.bin')).rejects.toThrow(/text only/);
    expect(await sb.files.read('bin/none.bin', { format: 'bytes' }).catch((e: Error) => e.name)).toMatch(
      /SandboxFileError|NotFound/,
    );
  }, 60_000);

  it('multi-MB random files written from Node and web streams read back with the same checksum', async () => {
    const sb = await sandbox(clients()[transport]);
    // 6 MB fits the write limit (sent whole); 12 MB goes past it (sent as a one-file tar).
    for (const size of [6 * 1024 * 1024 + 3, 12 * 1024 * 1024 + 5]) {
      const data = randomBytes(size);
      const node = Readable.from(
        (function* () {
          for (let at = 0; at < size; at += 256 * 1024) yield data.subarray(at, at + 256 * 1024);
        })(),
      );
      expect(await sb.files.write(`rand/node-${size}.bin`, node)).toBe(size);
      expect(sha(await sb.files.read(`rand/node-${size}.bin`, { format: 'bytes' }))).toBe(sha(data));
      const web = new Blob([data]).stream();
      expect(await sb.files.write(`rand/web-${size}.bin`, web)).toBe(size);
      const back = await collect(await sb.files.read(`rand/web-${size}.bin`, { format: 'stream' }));
      expect(back.length).toBe(size);
      expect(sha(back)).toBe(sha(data));
    }
  }, 180_000);
});

describe('file bodies the API refuses early', () => {
  it('a 50 MB write over HTTP is SandboxLimitError naming the limit, not an unreachable API', async () => {
    const sb = await sandbox(http);
    const big = new Uint8Array(50 * 1024 * 1024).fill(7);
    const err = await sb.files.write('big.bin', big).catch((e: Error) => e);
    expect(err).toMatchObject({ name: 'SandboxLimitError' });
    expect((err as Error).message).toMatch(/over the API's limit of 16777216 bytes/);
    // The connection is fine after it: the next call goes through.
    expect(await sb.files.write('small.txt', 'ok')).toBe(2);
  }, 60_000);

  it('the API answers 413 before the body (Expect: 100-continue), and the SDK sends none of it', async () => {
    // The API alone: a 50 MB Content-Length is not invited, the 413 comes without it.
    const url = new URL(`/v1/sandboxes/none/fs?path=x`, s.url);
    const answer = await new Promise<{ status: number; invited: boolean }>((resolve, reject) => {
      let invited = false;
      const req = httpRequest(url, {
        method: 'PUT',
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': 'application/octet-stream',
          'content-length': String(50 * 1024 * 1024),
          expect: '100-continue',
        },
      });
      req.on('continue', () => {
        invited = true;
        req.destroy();
        resolve({ status: 100, invited });
      });
      req.on('response', (res) => {
        res.resume();
        req.destroy();
        resolve({ status: res.statusCode ?? 0, invited });
      });
      req.on('error', reject);
      req.flushHeaders();
    });
    expect(answer).toEqual({ status: 413, invited: false });

    // The SDK through a proxy that counts what it sends: the refusal, and not the 50 MB.
    let sent = 0;
    const api = new URL(s.url);
    const proxy = createServer((client) => {
      const upstream = connect(Number(api.port), api.hostname);
      client.on('data', (chunk: Buffer) => {
        sent += chunk.length;
      });
      client.pipe(upstream).pipe(client);
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const viaProxy = new SandstreamClient({
      url: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
      apiKey: key,
    });
    try {
      const sb = await viaProxy.sandboxes.connect((await sandbox(http)).id);
      sent = 0;
      const err = await sb.files.write('big.bin', new Uint8Array(50 * 1024 * 1024)).catch((e: Error) => e);
      expect(err).toMatchObject({ name: 'SandboxLimitError' });
      expect(sent).toBeLessThan(1024 * 1024);
    } finally {
      await viaProxy.close();
      proxy.close();
    }
  }, 60_000);
});

describe('API', () => {
  async function pollHistory(id: string, pid: string): Promise<void> {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const res = await s.request(`/v1/sandboxes/${id}/history`, { key });
      const entries = (await res.json()) as { id: string; result?: unknown }[];
      if (entries.find((e) => e.id === pid)?.result !== undefined) return;
      if (Date.now() > deadline) throw new Error(`process ${pid} never ended`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  it('DELETE of an unknown or finished process is 404; of a running one 202', async () => {
    const sb = await sandbox(http);
    const unknown = await s.request(`/v1/sandboxes/${sb.id}/processes/nope-1`, { method: 'DELETE', key });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ commandId: 'nope-1' });

    const done = await sb.processes.start(['true']);
    await pollHistory(sb.id, done.id);
    const finished = await s.request(`/v1/sandboxes/${sb.id}/processes/${done.id}`, {
      method: 'DELETE',
      key,
    });
    expect(finished.status).toBe(404);
    expect(((await finished.json()) as { detail: string }).detail).toMatch(/already ended/);
    // The SDK's kill of a finished process stays quiet, as over Redis.
    await expect(done.kill()).resolves.toBeUndefined();

    const running = await sb.processes.start(['sleep', '60']);
    const killed = await s.request(`/v1/sandboxes/${sb.id}/processes/${running.id}`, {
      method: 'DELETE',
      key,
    });
    expect(killed.status).toBe(202);
  }, 60_000);

  it('a DELETE with Content-Type: application/json and no body is accepted; an empty JSON POST is not', async () => {
    const sb = await sandbox(http);
    const running = await sb.processes.start(['sleep', '60']);
    const json = { 'content-type': 'application/json' };
    const kill = await s.request(`/v1/sandboxes/${sb.id}/processes/${running.id}`, {
      method: 'DELETE',
      key,
      headers: json,
    });
    expect(kill.status).toBe(202);
    const close = await s.request(`/v1/sandboxes/${sb.id}`, { method: 'DELETE', key, headers: json });
    expect(close.status).toBeLessThan(300);
    const post = await s.request('/v1/sandboxes', { method: 'POST', key, headers: json, body: '' });
    expect(post.status).toBe(400);
  }, 60_000);
});
