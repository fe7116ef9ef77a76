import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { SandstreamClient } from '../client.js';
import { clientSandboxHost, type SandboxDefaults } from './sandbox-host.js';
import { createSandstreamMcpServer } from './sandbox-tools.js';

/**
 * `sandstream mcp`: the tools over stdio on the CLI's client, until the MCP client closes our
 * stdin (or SIGINT / SIGTERM); then the sandboxes this connection created and did not keep are
 * closed before it resolves. Nothing but protocol goes to stdout; what it has to say goes to
 * stderr, which MCP clients show in their logs.
 */
export async function serveStdio(
  client: SandstreamClient,
  options: { version?: string; defaults?: SandboxDefaults } = {},
): Promise<void> {
  const { server, session } = createSandstreamMcpServer(clientSandboxHost(client, options.defaults), options);
  const transport = new StdioServerTransport();
  let end = () => {};
  const ended = new Promise<void>((resolve) => {
    end = () => resolve();
  });
  process.stdin.once('end', end);
  process.stdin.once('close', end);
  process.once('SIGINT', end);
  process.once('SIGTERM', end);
  server.server.onclose = end;
  await server.connect(transport);
  await ended;
  // The connection is over: a signal no longer means "end it". Left registered, these listeners
  // swallowed a SIGTERM sent while the sandboxes below were closing (an MCP client closes stdin,
  // waits 2 s, then sends SIGTERM), and the process went on until its SIGKILL (issue 34).
  for (const signal of STOP_SIGNALS) process.off(signal, end);
  const stopNow = stopOnSignalWhileClosing(session.pending());
  try {
    const closed = await session.end((id, err) =>
      process.stderr.write(`sandstream mcp: could not close sandbox ${id}: ${(err as Error).message}\n`),
    );
    if (closed.length > 0)
      process.stderr.write(`sandstream mcp: closed ${closed.length} sandbox(es) it created\n`);
  } finally {
    stopNow.dispose();
  }
  await server.close().catch(() => {});
}

const STOP_SIGNALS = ['SIGINT', 'SIGTERM'] as const;

/**
 * While the sandboxes this connection created close, SIGINT or SIGTERM stops the process at once,
 * as it would with no listener (the parent sees the signal), after saying what it leaves: each
 * close goes on in Sandstream once asked (one round trip), and a sandbox whose close was not yet
 * asked ends at its idle limit.
 */
function stopOnSignalWhileClosing(closing: number): { dispose(): void } {
  const stop = (signal: NodeJS.Signals) => {
    for (const s of STOP_SIGNALS) process.off(s, stop);
    process.stderr.write(
      `sandstream mcp: ${signal} while closing ${closing} sandbox(es) it created: stopping now; a close already asked goes on without us, any other ends at its idle limit\n`,
    );
    process.kill(process.pid, signal);
  };
  for (const s of STOP_SIGNALS) process.once(s, stop);
  return {
    dispose: () => {
      for (const s of STOP_SIGNALS) process.off(s, stop);
    },
  };
}
