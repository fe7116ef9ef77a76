import { lookup } from 'node:dns/promises';
import {
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type Server,
  type ServerResponse,
} from 'node:http';
import { connect, isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import type { Duplex } from 'node:stream';
import { allowEntries, type Egress, type EgressAllowEntry } from '@sandstream/wire';
import { allowedRanges, upstreamAddress } from '../docker/egress-destination.js';
import type { EgressResolver } from '../docker/egress-proxy.js';
import { type ProxyAccess, type ProxyAccessLookup, tokenMatches } from './egress-proxy-access.js';

/**
 * The egress proxy of domain allow-lists on Kubernetes (docs/kubernetes.md, "Egress"). Docker
 * redirects a sandbox's 80 and 443 to its proxy on the host; a NetworkPolicy can only allow or
 * drop, so here the sandbox is told of the proxy instead (HTTPS_PROXY / HTTP_PROXY in its pod)
 * and its policy lets it reach the proxy and nothing else by name. HTTPS goes through CONNECT
 * (TLS is never terminated), plain HTTP as absolute-form requests. The sandbox names itself and
 * its token in Proxy-Authorization (the userinfo of the proxy URL); the proxy checks the token
 * and the target against that sandbox's NetworkPolicy (egress-proxy-access.ts, route() below),
 * looks names up itself and connects only to a public address, or one in the allow-list's own
 * ranges.
 */
export interface EgressForwardProxyOptions {
  access: ProxyAccessLookup;
  /** Where names are looked up: the proxy's own resolver by default, never the sandbox's answer. */
  resolve?: EgressResolver;
  /** Default every address on a free port. */
  host?: string;
  port?: number;
}

/** Ports a domain entry is matched on, as on Docker: Host on 80, SNI on 443. */
const DOMAIN_PORTS = new Set([80, 443]);
const REALM = 'Basic realm="sandstream-egress"';

const hostResolver: EgressResolver = async (name) =>
  (await lookup(name, { all: true })).sort((a, b) => a.family - b.family).map((a) => a.address);

type Decision = { address: string; port: number; host: string } | { status: 403 | 407 | 502; reason: string };

function credentials(header: string | undefined): { user: string; token: string } | undefined {
  const match = /^Basic\s+(\S+)$/i.exec(header ?? '');
  if (!match) return undefined;
  const text = Buffer.from(match[1] as string, 'base64').toString('utf8');
  const colon = text.indexOf(':');
  return colon > 0 ? { user: text.slice(0, colon), token: text.slice(colon + 1) } : undefined;
}

/** This machine's own addresses: never an upstream, whatever a name resolves to. */
function localAddresses(): Set<string> {
  return new Set(
    Object.values(networkInterfaces())
      .flat()
      .flatMap((i) => (i ? [i.address] : [])),
  );
}

function domainAllowed(entries: EgressAllowEntry[], name: string): boolean {
  const host = name.toLowerCase().replace(/\.$/, '');
  // `*.example.com` is its subdomains only, as in a certificate.
  return entries.some(
    (e) => e.kind === 'domain' && (e.wildcard ? host.endsWith(`.${e.domain}`) : host === e.domain),
  );
}

export class EgressForwardProxy {
  private server: Server | undefined;
  private readonly sockets = new Set<Duplex>();

  constructor(private readonly options: EgressForwardProxyOptions) {}

  /** Starts listening (once); resolves to the port. */
  async listen(): Promise<number> {
    if (!this.server) {
      const server = createServer((req, res) => void this.forward(req, res));
      server.on('connect', (req, socket, head) => void this.tunnel(req, socket, head));
      server.on('connection', (socket) => this.track(socket));
      server.on('clientError', (_err, socket) => socket.destroy());
      this.server = server;
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(this.options.port ?? 0, this.options.host ?? '0.0.0.0', () => resolve());
      });
    }
    const address = this.server.address();
    return typeof address === 'object' && address ? address.port : 0;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise((resolve) => server.close(resolve));
  }

  private track(socket: Duplex): void {
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  }

  /** Who asks, whether its policy names `host`, and where to connect: or why not. */
  private async decide(req: IncomingMessage, host: string, port: number): Promise<Decision> {
    const who = credentials(req.headers['proxy-authorization']);
    if (!who)
      return { status: 407, reason: 'the egress proxy needs the sandbox name and token of its proxy URL' };
    let access: ProxyAccess | undefined;
    try {
      access = await this.options.access(who.user);
    } catch {
      // The API server did not answer: never a reason to let it through. Its error stays here (it
      // may name cluster internals), the sandbox is told to try again.
      return { status: 502, reason: "the sandbox's egress policy could not be read; try again" };
    }
    if (!access || !tokenMatches(who.token, access.tokenSha256))
      return { status: 407, reason: `no sandbox ${who.user} with that proxy token` };
    const name = host.replace(/^\[|\]$/g, '');
    return this.route(access.egress, name, port);
  }

  /**
   * Where the sandbox's policy lets this request go. The pod's clients send everything through the
   * proxy (its environment cannot change when a live update does), so the proxy follows the whole
   * policy, not only its domains: `none` nothing; `internet` any public address or name on any
   * port; an allow-list its domains on 80 and 443 and its own ranges (with their ports) by address,
   * exactly what its NetworkPolicy lets the pod reach directly.
   */
  private async route(egress: Egress, name: string, port: number): Promise<Decision> {
    if (egress === 'none') return { status: 403, reason: 'this sandbox\'s egress is "none"' };
    const entries = allowEntries(egress);
    const local = localAddresses();
    const family = isIP(name);
    if (family !== 0) {
      const type = family === 4 ? 'ipv4' : 'ipv6';
      const ranges = allowedRanges(entries.filter((e) => e.kind === 'cidr' && (e.port ?? port) === port));
      const allowed =
        egress === 'internet'
          ? upstreamAddress([name], allowedRanges([]), local) !== undefined
          : !local.has(name) && ranges[type].check(name, type);
      if (!allowed)
        return { status: 403, reason: `${name}:${port} is not on this sandbox's egress allow-list` };
      return { address: name, port, host: name };
    }
    if (egress !== 'internet') {
      if (!DOMAIN_PORTS.has(port))
        return { status: 403, reason: `port ${port}: domains are reached on 80 and 443 only` };
      if (!domainAllowed(entries, name))
        return { status: 403, reason: `${name} is not on this sandbox's egress allow-list` };
    }
    let address: string | undefined;
    try {
      address = upstreamAddress(
        await (this.options.resolve ?? hostResolver)(name),
        allowedRanges(entries),
        local,
      );
    } catch {
      address = undefined;
    }
    if (!address) return { status: 403, reason: `${name} resolves to no address this sandbox may reach` };
    return { address, port, host: name };
  }

  /** CONNECT host:port: a tunnel, the TLS inside it untouched. */
  private async tunnel(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    this.track(socket);
    const target = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(req.url ?? '');
    const decision = target
      ? await this.decide(req, target[1] as string, Number(target[2]))
      : ({ status: 403, reason: 'CONNECT needs host:port' } as const);
    if ('status' in decision) return refuseRaw(socket, decision.status, decision.reason);
    // Gone while its policy was read: nothing to connect for.
    if (socket.destroyed) return;
    const upstream = connect({ host: decision.address, port: decision.port, allowHalfOpen: true });
    this.track(upstream);
    let connected = false;
    upstream.once('error', () => {
      if (connected) socket.destroy();
      else refuseRaw(socket, 502, `${decision.host}:${decision.port} could not be reached`);
    });
    socket.once('close', () => upstream.destroy());
    upstream.once('connect', () => {
      connected = true;
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length) upstream.write(head);
      socket.pipe(upstream);
      upstream.pipe(socket);
    });
  }

  /** GET http://host/path: the request is sent on to the name's address, the answer streamed back. */
  private async forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let url: URL;
    try {
      url = new URL(req.url ?? '');
      if (url.protocol !== 'http:') throw new Error('not http');
    } catch {
      return refuse(res, 403, 'the egress proxy forwards absolute http:// requests and CONNECT only');
    }
    const decision = await this.decide(req, url.hostname, Number(url.port || 80));
    if ('status' in decision) return refuse(res, decision.status, decision.reason);
    const headers: OutgoingHttpHeaders = { ...req.headers };
    delete headers['proxy-authorization'];
    delete headers['proxy-connection'];
    headers.host = url.host;
    const upstream = httpRequest({
      host: decision.address,
      port: decision.port,
      method: req.method,
      path: `${url.pathname}${url.search}`,
      headers,
      setHost: false,
    });
    // A client that goes away takes its upstream request with it.
    res.once('close', () => upstream.destroy());
    upstream.on('response', (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', () => {
      if (!res.headersSent) refuse(res, 502, `${decision.host}:${decision.port} could not be reached`);
      else res.destroy();
    });
    req.pipe(upstream);
  }
}

function refuse(res: ServerResponse, status: number, reason: string): void {
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    ...(status === 407 ? { 'proxy-authenticate': REALM } : {}),
  });
  res.end(`${reason}\n`);
}

function refuseRaw(socket: Duplex, status: number, reason: string): void {
  const text =
    status === 407 ? 'Proxy Authentication Required' : status === 403 ? 'Forbidden' : 'Bad Gateway';
  const extra = status === 407 ? `Proxy-Authenticate: ${REALM}\r\n` : '';
  const body = `${reason}\n`;
  socket.end(
    `HTTP/1.1 ${status} ${text}\r\n${extra}Content-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}
