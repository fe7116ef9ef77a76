import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { repoRoot } from '@sandstream/test-support';

/** The `sandstream` command as users run it (its start-up snapshot when built, else modules). */
export const sandstreamBin = join(repoRoot, 'libs/client/bin/sandstream');

/** An MCP client (the official SDK's) and how to end its connection as a client going away does. */
export interface McpConnection {
  client: Client;
  /** Ends the connection: stdio closes the server's stdin, HTTP deletes the session. */
  disconnect(): Promise<void>;
  /** The server's stderr (stdio only). */
  stderr(): string;
}

/** `sandstream mcp` spawned from the built CLI, over stdio, with `args` and `env`. */
export async function stdioConnection(args: string[], env: Record<string, string>): Promise<McpConnection> {
  const transport = new StdioClientTransport({
    command: sandstreamBin,
    args: ['mcp', ...args],
    env: { ...(process.env as Record<string, string>), SANDSTREAM_NO_SNAPSHOT_WARNING: '1', ...env },
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  const client = new Client({ name: 'sandstream-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, disconnect: () => client.close(), stderr: () => stderr };
}

/** The API's /mcp over Streamable HTTP with `key` as its bearer token. */
export async function httpConnection(apiUrl: string, key: string): Promise<McpConnection> {
  const transport = new StreamableHTTPClientTransport(new URL(`${apiUrl}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${key}` } },
  });
  const client = new Client({ name: 'sandstream-test', version: '1.0.0' });
  await client.connect(transport);
  return {
    client,
    disconnect: async () => {
      await transport.terminateSession();
      await client.close();
    },
    stderr: () => '',
  };
}

/** A tool call's answer as the tests read it. */
export interface ToolAnswer {
  isError: boolean;
  text: string;
  structured: Record<string, unknown>;
}

export async function callTool(
  client: Client,
  name: string,
  args: Record<string, unknown>,
  options: Parameters<Client['callTool']>[2] = {},
): Promise<ToolAnswer> {
  const result = (await client.callTool({ name, arguments: args }, undefined, options)) as CallToolResult;
  const text = result.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');
  return {
    isError: result.isError === true,
    text,
    structured: (result.structuredContent ?? {}) as Record<string, unknown>,
  };
}
