import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A readiness check: resolves true when the dependency is usable. Must not hang (it is timed out). */
export type ReadinessCheck = () => Promise<boolean>;

export interface HealthServerOptions {
  port: number;
  /** Default loopback: see HEALTH_HOST in service-env.ts for why not all interfaces. */
  host?: string;
  /** Named checks run on every /readyz request. */
  checks: Record<string, ReadinessCheck>;
  /**
   * Named checks run on every /healthz request: false only when the dependency cannot recover
   * without a restart (a dependency that is merely down fails /readyz, not these), so an
   * orchestrator restarts the process instead of leaving it wedged.
   */
  liveness?: Record<string, ReadinessCheck>;
  /** Per-check timeout. */
  checkTimeoutMs?: number;
}

export interface HealthServer {
  readonly port: number;
  /** After this, /readyz answers 503 so load balancers stop sending work during shutdown. */
  markDraining(): void;
  close(): Promise<void>;
}

async function runCheck(check: ReadinessCheck, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      check(),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), timeoutMs);
      }),
    ]);
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}

async function runChecks(
  checks: Record<string, ReadinessCheck>,
  timeoutMs: number,
): Promise<{ ok: boolean; checks: Record<string, 'ok' | 'failing'> }> {
  const names = Object.keys(checks);
  const results = await Promise.all(names.map((n) => runCheck(checks[n]!, timeoutMs)));
  return {
    ok: results.every(Boolean),
    checks: Object.fromEntries(names.map((n, i) => [n, results[i] ? 'ok' : 'failing'])),
  };
}

/**
 * GET /healthz: the process is alive and can recover: 200 while the event loop turns and every
 * liveness check passes, else 503 naming the failing one.
 * GET /readyz: 200 when every check passes and the service is not draining, else 503; the JSON
 * body says which check failed.
 */
export async function startHealthServer(options: HealthServerOptions): Promise<HealthServer> {
  let draining = false;
  const timeoutMs = options.checkTimeoutMs ?? 2000;
  const server: Server = createServer((req, res) => {
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.method !== 'GET') return send(405, { error: 'GET only' });
    if (req.url === '/healthz') {
      const liveness = options.liveness ?? {};
      if (Object.keys(liveness).length === 0) return send(200, { status: 'ok' });
      void runChecks(liveness, timeoutMs).then(({ ok, checks }) =>
        send(ok ? 200 : 503, { status: ok ? 'ok' : 'failing', checks }),
      );
      return;
    }
    if (req.url === '/readyz') {
      void runChecks(options.checks, timeoutMs).then(({ ok, checks }) => {
        const ready = !draining && ok;
        send(ready ? 200 : 503, { status: ready ? 'ready' : draining ? 'draining' : 'not-ready', checks });
      });
      return;
    }
    send(404, { error: 'not found: try /healthz or /readyz' });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host ?? '127.0.0.1', () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    markDraining: () => {
      draining = true;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
