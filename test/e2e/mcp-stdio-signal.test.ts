import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { pollUntil, testRedisUrl } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandstreamBin } from '../api/mcp-clients.js';
import { type Stack, startStack } from '../helpers/services-stack.js';

// Issue 34: `sandstream mcp` closes the sandboxes it created once its client goes away. An MCP
// client closes the server's stdin, waits (the SDK's: 2 s), then sends SIGTERM. The server's own
// SIGTERM listener stayed registered while it closed its sandboxes, so that SIGTERM was swallowed
// and the process went on until the client's SIGKILL. A close that takes long is made certain
// here by stopping the services after the create: the close is asked, and nobody carries it out.

let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ label: 'mcp-signal' });
}, 120_000);

afterAll(async () => {
  await stack?.stop();
}, 120_000);

/** `sandstream mcp` on this stack, and a JSON-RPC call over its stdin/stdout. */
function startMcp(): {
  child: ChildProcessWithoutNullStreams;
  call: (method: string, params: object) => Promise<unknown>;
  stderr: () => string;
} {
  const child = spawn(sandstreamBin, ['mcp', '--image', 'sandstream/busybox:static'], {
    env: {
      ...process.env,
      REDIS_URL: testRedisUrl(),
      SANDSTREAM_NAMESPACE: stack.namespace,
      SANDSTREAM_NO_SNAPSHOT_WARNING: '1',
    },
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  const waiting = new Map<number, (result: unknown) => void>();
  createInterface({ input: child.stdout }).on('line', (line) => {
    const message = JSON.parse(line) as { id?: number; result?: unknown; error?: unknown };
    if (message.id !== undefined) waiting.get(message.id)?.(message.result ?? message.error);
  });
  let nextId = 1;
  const call = (method: string, params: object) =>
    new Promise<unknown>((resolve) => {
      const id = nextId++;
      waiting.set(id, resolve);
      child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`);
    });
  return { child, call, stderr: () => stderr };
}

describe('sandstream mcp over stdio, stopping', () => {
  it('a SIGTERM while it closes the sandboxes it created stops it at once, saying what it leaves', async () => {
    const mcp = startMcp();
    await mcp.call('initialize', {
      protocolVersion: '2025-06-18',
      capabilities: {},
      clientInfo: { name: 'sandstream-test', version: '1.0.0' },
    });
    mcp.child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);
    const created = (await mcp.call('tools/call', { name: 'create_sandbox', arguments: {} })) as {
      structuredContent?: { sandboxId?: string };
    };
    const sandboxId = created.structuredContent?.sandboxId;
    expect(sandboxId, JSON.stringify(created)).toBeTypeOf('string');
    if (!sandboxId) return;

    // Nobody will carry the close out: the server waits on it (for minutes) once it asked.
    await stack.stopServices();
    const exited = once(mcp.child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    mcp.child.stdin.end();
    await pollUntil(
      'the close to be asked',
      async () => (await stack.client.sandboxes.get(sandboxId))?.state === 'closing',
      { timeoutMs: 30_000 },
    );
    expect(mcp.child.exitCode).toBeNull();

    mcp.child.kill('SIGTERM');
    // Without the fix the SIGTERM is swallowed: the process waits out its close (120 s).
    const [code, signal] = await Promise.race([
      exited,
      new Promise<[string, string]>((resolve) => setTimeout(() => resolve(['still running', '']), 20_000)),
    ]);
    if (code === 'still running') mcp.child.kill('SIGKILL');
    expect({ code, signal }).toEqual({ code: null, signal: 'SIGTERM' });
    expect(mcp.stderr()).toMatch(/SIGTERM while closing 1 sandbox\(es\) it created: stopping now/);

    // The close was asked, so it goes on once the services are back.
    await stack.startServices();
    await pollUntil(
      'the sandbox to close',
      async () => (await stack.client.sandboxes.get(sandboxId))?.state === 'closed',
      { timeoutMs: 60_000 },
    );
  }, 180_000);
});
