import { once } from 'node:events';
import { Agent, createServer, get, type IncomingMessage, type Server } from 'node:http';
import { createServer as createTcpServer, type Socket, type Server as TcpServer } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { exchange, mergeHeaders, passesThrough, relay, requestHead } from './preview-passthrough.js';
import { UpstreamSockets } from './preview-upstream-sockets.js';

/**
 * The pass-through on real sockets: an app written byte by byte (a TCP server, so that its
 * framing is exactly what the test says), a client-facing HTTP server relaying to it the way the
 * preview proxy does, and Node's HTTP client reading the result.
 */
const closers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

const listen = async <S extends Server | TcpServer>(server: S): Promise<number> => {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  closers.push(
    () =>
      new Promise<void>((resolve) => {
        (server as Server).closeAllConnections?.();
        server.close(() => resolve());
      }),
  );
  return (server.address() as { port: number }).port;
};

/** An app answering each request with `answer(path)`, written raw; counts its connections. */
const rawApp = async (answer: (path: string) => string[]) => {
  const seen = { connections: 0, heads: [] as string[] };
  const sockets: Socket[] = [];
  const server = createTcpServer((socket) => {
    seen.connections++;
    sockets.push(socket);
    let buffered = '';
    socket.on('data', (data) => {
      buffered += data.toString('latin1');
      for (let end = buffered.indexOf('\r\n\r\n'); end !== -1; end = buffered.indexOf('\r\n\r\n')) {
        const head = buffered.slice(0, end);
        buffered = buffered.slice(end + 4);
        seen.heads.push(head);
        const path = head.split(' ')[1] as string;
        // Each piece its own write, a moment apart: the relay sees the framing cut where the test cuts it.
        const pieces = answer(path);
        const next = () => {
          const piece = pieces.shift();
          if (piece === undefined) return;
          if (piece === 'CLOSE') socket.end();
          else socket.write(Buffer.from(piece, 'latin1'), () => setTimeout(next, 2));
        };
        next();
      }
    });
    socket.on('error', () => {});
  });
  closers.push(() => {
    for (const socket of sockets) socket.destroy();
  });
  const port = await listen(server);
  return { port, seen };
};

/** The client-facing side: every GET relayed to 127.0.0.1:`appPort` through one socket pool. */
const relayServer = async (appPort: number, pool = new UpstreamSockets()) => {
  closers.push(() => pool.closeAll());
  const server = createServer((req, res) => {
    res.setHeader('set-cookie', 'ours=1');
    void (async () => {
      const upstream = await pool.acquire('127.0.0.1', appPort);
      try {
        const answer = await exchange(
          upstream,
          requestHead(req.url ?? '/', `127.0.0.1:${appPort}`, req.headers),
          2000,
        );
        relay(answer, mergeHeaders({}, answer.head.headers), res, (reusable) => {
          if (reusable) pool.release('127.0.0.1', appPort, upstream);
        });
      } catch (err) {
        res.writeHead(502).end((err as Error).message);
      }
    })();
  });
  return listen(server);
};

const agent = new Agent({ keepAlive: true, maxSockets: 1 });
closers.push(() => agent.destroy());

const fetchText = (port: number, path: string, headers: Record<string, string> = {}) =>
  new Promise<{ res: IncomingMessage; body: string; trailers: NodeJS.Dict<string> }>((resolve, reject) => {
    get({ host: '127.0.0.1', port, path, agent, headers }, (res) => {
      let body = '';
      res.setEncoding('latin1');
      res.on('data', (d: string) => {
        body += d;
      });
      res.on('end', () => resolve({ res, body, trailers: res.trailers }));
      res.on('error', reject);
    }).on('error', reject);
  });

describe('preview pass-through', () => {
  it('relays a chunked body with its own chunks, cut anywhere, trailers dropped, and reuses the connection', async () => {
    const app = await rawApp((path) =>
      path === '/chunked'
        ? [
            'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=77\r\n\r\n5\r',
            '\nhello\r\n1',
            '0\r\n0123456789abcdef\r\n0',
            '\r\nX-Trailer: t\r\n',
            '\r\n',
          ]
        : ['HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab', 'cde'],
    );
    const port = await relayServer(app.port);
    const first = await fetchText(port, '/chunked', { connection: 'keep-alive', 'x-client': 'c' });
    expect(first.res.statusCode).toBe(200);
    expect(first.body).toBe('hello0123456789abcdef');
    expect(first.trailers).toEqual({});
    expect(first.res.headers['transfer-encoding']).toBe('chunked');
    // The app's hop-by-hop headers stay on its hop; the API's own cookie is kept.
    expect(first.res.headers['x-hop']).toBeUndefined();
    expect(first.res.headers['keep-alive']).not.toBe('timeout=77');
    expect(first.res.headers['set-cookie']).toEqual(['ours=1']);
    const second = await fetchText(port, '/length');
    expect(second.body).toBe('abcde');
    expect(second.res.headers['content-length']).toBe('5');
    // One connection to the app for both, and the client's own headers forwarded, Host the app's.
    expect(app.seen.connections).toBe(1);
    expect(app.seen.heads[0]).toContain('x-client: c');
    expect(app.seen.heads[0]).toContain(`host: 127.0.0.1:${app.port}`);
    expect(app.seen.heads[0]).not.toMatch(/^connection:/im);
  });

  it('skips a 103, answers 304 with no body, and a close-delimited body to its end', async () => {
    const app = await rawApp((path) =>
      path === '/early'
        ? ['HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok']
        : path === '/cached'
          ? ['HTTP/1.1 304 Not Modified\r\nETag: "x"\r\n\r\n']
          : ['HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil ', 'the end', 'CLOSE'],
    );
    const port = await relayServer(app.port);
    expect((await fetchText(port, '/early')).body).toBe('ok');
    const cached = await fetchText(port, '/cached');
    expect(cached.res.statusCode).toBe(304);
    expect(cached.res.headers.etag).toBe('"x"');
    expect((await fetchText(port, '/close')).body).toBe('until the end');
    // After a close-delimited answer the next request opens a new connection.
    expect((await fetchText(port, '/early')).body).toBe('ok');
    expect(app.seen.connections).toBe(2);
  });

  it('answers 502 naming what was wrong with a malformed head; cuts a body the app cuts short', async () => {
    const app = await rawApp((path) =>
      path === '/bad'
        ? ['HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n']
        : ['HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort', 'CLOSE'],
    );
    const port = await relayServer(app.port);
    const bad = await fetchText(port, '/bad');
    expect(bad.res.statusCode).toBe(502);
    expect(bad.body).toContain('content-length 1, 2 is not one decimal length');
    await expect(fetchText(port, '/short')).rejects.toThrow(/aborted|socket hang up/);
  });

  it('reads a 16 MB body into a few reused buffers, not one per read', async () => {
    const mb = Buffer.alloc(1024 * 1024, 120).toString('latin1');
    const app = await rawApp(() => [
      `HTTP/1.1 200 OK\r\nContent-Length: ${16 * mb.length}\r\n\r\n`,
      ...Array.from({ length: 16 }, () => mb),
    ]);
    const pool = new UpstreamSockets();
    const port = await relayServer(app.port, pool);
    const { body } = await fetchText(port, '/big');
    expect(body.length).toBe(16 * mb.length);
    // At least 256 reads of 64 KB; at most 16 of them in flight, plus the one being read into.
    expect(pool.readBuffersMade).toBeLessThanOrEqual(18);
  });

  it('fails at once, not at its timeout, when the connection is destroyed before an answer (the client gone)', async () => {
    const app = await rawApp(() => []);
    const pool = new UpstreamSockets();
    closers.push(() => pool.closeAll());
    const upstream = await pool.acquire('127.0.0.1', app.port);
    const answer = exchange(upstream, requestHead('/never', 'app', {}), 60_000);
    setTimeout(() => upstream.socket.destroy(), 50);
    await expect(answer).rejects.toThrow(/closed the connection before answering/);
  });

  it('takes only body-less HTTP/1.1 GETs on safe paths', () => {
    const req = (method: string, headers: Record<string, string> = {}, httpVersion = '1.1') => ({
      method,
      headers,
      httpVersion,
    });
    expect(passesThrough(req('GET'), '/a%20b')).toBe(true);
    expect(passesThrough(req('GET', { 'content-length': '0' }), '/')).toBe(true);
    expect(passesThrough(req('HEAD'), '/')).toBe(false);
    expect(passesThrough(req('POST'), '/')).toBe(false);
    expect(passesThrough(req('GET', {}, '1.0'), '/')).toBe(false);
    expect(passesThrough(req('GET', { upgrade: 'websocket' }), '/')).toBe(false);
    expect(passesThrough(req('GET', { 'content-length': '3' }), '/')).toBe(false);
    expect(passesThrough(req('GET'), '/a/%2e%2e/b')).toBe(false);
    expect(passesThrough(req('GET'), '/%zz')).toBe(false);
  });
});
