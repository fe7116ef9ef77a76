import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createSandstreamMcpServer, type SandboxHost } from '@sandstream/client/mcp';
import type { Logger } from '@sandstream/telemetry';
import type { Principal } from '../principal.js';

interface Session {
  transport: StreamableHTTPServerTransport;
  /** The key that opened it: no other may use it. */
  keyId: string;
  tenant: string;
  idle: NodeJS.Timeout | undefined;
  /** Its requests still being answered (a long run_command, the GET stream): it is not idle meanwhile. */
  open: number;
}

/**
 * The MCP sessions this replica serves (Streamable HTTP, stateful): one MCP server per session,
 * held in memory, so a session lives on the replica that initialised it (a balancer keeps it
 * there by the Mcp-Session-Id header; elsewhere it is answered 404 and the client starts a new
 * one, as the protocol has it). A session ends when its client deletes it, after `idleMs`
 * without a request, or when the API stops; then the sandboxes it created and did not keep are
 * closed. Idle means no request open: a long command, or the client's open GET stream, keeps it.
 */
export class McpSessions {
  private readonly sessions = new Map<string, Session>();

  constructor(
    private readonly options: {
      idleMs: number;
      /** Sessions this replica holds at most (each is an MCP server in its memory). */
      maxSessions: number;
      /** Sessions one key holds at most on this replica: one key cannot take them all. */
      maxSessionsPerKey: number;
      version?: string | undefined;
      logger?: Logger | undefined;
    },
  ) {}

  /**
   * Why `principal` may not open a session now, naming the limit and its setting; undefined when
   * it may. A session's server and transport live in this replica's memory until the session
   * ends, so their number is bounded, and a key's share of it too.
   */
  refusal(principal: Principal): string | undefined {
    const { maxSessions, maxSessionsPerKey } = this.options;
    if (this.sessions.size >= maxSessions)
      return `this API replica holds its limit of ${maxSessions} MCP sessions (API_MCP_MAX_SESSIONS): end one (DELETE /mcp) or retry later`;
    let ofKey = 0;
    for (const session of this.sessions.values()) if (session.keyId === principal.keyId) ofKey++;
    if (ofKey >= maxSessionsPerKey)
      return `this key holds its limit of ${maxSessionsPerKey} MCP sessions on this API replica (API_MCP_MAX_SESSIONS_PER_KEY): end one (DELETE /mcp) or wait for one to go idle`;
    return undefined;
  }

  /** A new session's transport for `principal`, ready for its initialize request. */
  async open(host: SandboxHost, principal: Principal): Promise<StreamableHTTPServerTransport> {
    const { server, session: sandboxes } = createSandstreamMcpServer(host, { version: this.options.version });
    let id: string | undefined;
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (sessionId) => {
        id = sessionId;
        this.sessions.set(sessionId, {
          transport,
          keyId: principal.keyId,
          tenant: principal.tenant,
          idle: undefined,
          open: 0,
        });
        this.touch(sessionId);
      },
    });
    transport.onclose = () => {
      if (id !== undefined) {
        clearTimeout(this.sessions.get(id)?.idle);
        this.sessions.delete(id);
      }
      void sandboxes
        .end((sandboxId, err) =>
          this.options.logger?.warn({ err, sandboxId }, 'mcp: could not close a sandbox its session created'),
        )
        .then(() => server.close())
        .catch(() => {});
    };
    await server.connect(transport);
    return transport;
  }

  /**
   * The session's transport, when it exists here and `principal` is the key that opened it. The
   * session is not idle until `response` closes (nor while any other of its requests is open).
   */
  get(
    sessionId: string,
    principal: Principal,
    response: ServerResponse,
  ): StreamableHTTPServerTransport | undefined {
    const session = this.sessions.get(sessionId);
    if (!session || session.keyId !== principal.keyId || session.tenant !== principal.tenant)
      return undefined;
    session.open++;
    clearTimeout(session.idle);
    response.once('close', () => {
      session.open--;
      if (session.open === 0) this.touch(sessionId);
    });
    return session.transport;
  }

  /** Sessions open now (tests, metrics). */
  get size(): number {
    return this.sessions.size;
  }

  /** Ends every session (the API is stopping): their sandboxes are closed as on a disconnect. */
  async closeAll(): Promise<void> {
    await Promise.all([...this.sessions.values()].map((s) => s.transport.close().catch(() => {})));
  }

  /** Its idle end starts again (after its last request was answered). */
  private touch(sessionId: string): void {
    const session = this.sessions.get(sessionId);
    if (!session || session.open > 0) return;
    clearTimeout(session.idle);
    session.idle = setTimeout(() => void session.transport.close().catch(() => {}), this.options.idleMs);
    session.idle.unref();
  }
}
