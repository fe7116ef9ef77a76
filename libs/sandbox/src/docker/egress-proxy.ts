import { lookup } from 'node:dns/promises';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { networkInterfaces } from 'node:os';
import { allowEntries, type Egress } from '@sandstream/wire';
import { allowedRanges, type Ranges, upstreamAddress } from './egress-destination.js';
import { HTTP_HEAD_MAX, httpRequestHost } from './http-host.js';
import { clientHelloServerName } from './tls-sni.js';

/** Where a name is looked up: the host's resolver by default (never the sandbox's answer). */
export type EgressResolver = (name: string) => Promise<string[]>;

/** The ports the proxy listens on: the sandbox's 80 and 443 are redirected there (egress-rules.ts). */
export interface EgressProxyPorts {
  http: number;
  tls: number;
}

interface SourcePolicy {
  domains: Array<{ domain: string; wildcard: boolean }>;
  /** The allow-list's own ranges: a name resolving into one of them may be reached (else public only). */
  ranges: Ranges;
}

const PEEK_TIMEOUT_MS = 10_000;

/** IPv4 first (a host may have no IPv6 route), then IPv6: a name with AAAA records only is reachable. */
const hostResolver: EgressResolver = async (name) =>
  (await lookup(name, { all: true })).sort((a, b) => a.family - b.family).map((a) => a.address);

/**
 * The egress proxy of domain allow-lists (docs/sandbox-backends.md, "Egress rules"): a sandbox's
 * outbound TCP 80 and 443 arrive here (nat REDIRECT on its MAC), the name is read from the Host
 * header or the ClientHello's SNI without terminating TLS, and the connection is spliced to that
 * name's address (looked up here) on the same port when the sandbox's allow-list names it; else it
 * is closed. A connection is told apart by its source address, which a sandbox cannot change.
 */
export class EgressProxy {
  private readonly bySource = new Map<string, SourcePolicy>();
  private readonly sockets = new Set<Socket>();
  private servers: Server[] = [];
  private listening: Promise<EgressProxyPorts> | undefined;

  constructor(private readonly options: { resolve?: EgressResolver; host?: string } = {}) {}

  /** Starts both listeners once (every address: the gateway of any sandbox bridge). */
  ports(): Promise<EgressProxyPorts> {
    this.listening ??= Promise.all([this.listen(80), this.listen(443)]).then(([http, tls]) => ({
      http,
      tls,
    }));
    return this.listening;
  }

  /** Sets (or replaces) what the sandbox at `source` may reach by name; no domains: forgets it. */
  set(source: string, egress: Egress): void {
    const entries = allowEntries(egress);
    const domains = entries.flatMap((e) => (e.kind === 'domain' ? [e] : []));
    if (domains.length === 0) {
      this.forget(source);
      return;
    }
    this.bySource.set(source, { domains, ranges: allowedRanges(entries) });
  }

  forget(source: string): void {
    this.bySource.delete(source);
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await Promise.all(this.servers.map((s) => new Promise((resolve) => s.close(resolve))));
    this.servers = [];
    this.listening = undefined;
  }

  private listen(port: 80 | 443): Promise<number> {
    const server = createServer({ allowHalfOpen: true }, (socket) => this.accept(socket, port));
    this.servers.push(server);
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      // IPv4 only: a sandbox network with IPv6 is refused at create (the rules are iptables', not
      // ip6tables'), so no sandbox connection arrives by IPv6. Upstreams may be IPv6 (splice).
      server.listen(0, this.options.host ?? '0.0.0.0', () => {
        const address = server.address();
        resolve(typeof address === 'object' && address ? address.port : 0);
      });
    });
  }

  private accept(socket: Socket, port: 80 | 443): void {
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    const source = (socket.remoteAddress ?? '').replace(/^::ffff:/, '');
    const policy = this.bySource.get(source);
    if (!policy) return void socket.destroy();
    socket.setTimeout(PEEK_TIMEOUT_MS, () => socket.destroy());
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const name = port === 443 ? clientHelloServerName(head) : httpRequestHost(head);
      if (name === undefined && head.length < HTTP_HEAD_MAX + 5) return;
      socket.off('data', onData);
      socket.pause();
      if (!name || !this.allowed(policy, name)) return void socket.destroy();
      void this.splice(socket, head, name, port, policy);
    };
    socket.on('data', onData);
  }

  private allowed(policy: SourcePolicy, name: string): boolean {
    const host = name.toLowerCase().replace(/\.$/, '');
    // `*.example.com` is its subdomains only, as in a certificate.
    return policy.domains.some((d) => (d.wildcard ? host.endsWith(`.${d.domain}`) : host === d.domain));
  }

  private async splice(socket: Socket, head: Buffer, name: string, port: number, policy: SourcePolicy) {
    let address: string | undefined;
    try {
      const local = new Set(
        Object.values(networkInterfaces())
          .flat()
          .flatMap((i) => (i ? [i.address] : [])),
      );
      address = upstreamAddress(await (this.options.resolve ?? hostResolver)(name), policy.ranges, local);
    } catch {
      address = undefined;
    }
    if (!address || socket.destroyed) return void socket.destroy();
    // Half-open both ways: a client that shuts its side after the request still gets the answer.
    const upstream = connect({ host: address, port, allowHalfOpen: true });
    this.sockets.add(upstream);
    upstream.once('close', () => this.sockets.delete(upstream));
    upstream.on('error', () => {
      upstream.destroy();
      socket.destroy();
    });
    socket.once('close', () => upstream.destroy());
    upstream.once('connect', () => {
      socket.setTimeout(0);
      upstream.write(head);
      socket.pipe(upstream);
      upstream.pipe(socket);
      socket.resume();
    });
  }
}
