import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiStack, startApiStack } from '../helpers/api-stack.js';

// Issue 34: an HTTP MCP session is an MCP server held in one API replica's memory until it ends
// (deleted, idle, the API stopping). Their number is bounded per replica, and one key's share of
// it too, with an answer that names the limit and its setting; ending a session frees its place.

let s: ApiStack;
const keys = { acme: '', globex: '' };

beforeAll(async () => {
  s = await startApiStack({
    label: 'api-mcp-limits',
    env: { LOG_ARCHIVE: 'off' },
    apiEnv: { API_MCP_MAX_SESSIONS: '3', API_MCP_MAX_SESSIONS_PER_KEY: '2' },
  });
  keys.acme = (await s.key('acme')).key;
  keys.globex = (await s.key('globex')).key;
}, 180_000);

afterAll(async () => {
  await s?.stop();
}, 120_000);

/** An initialize over Streamable HTTP, as an MCP client sends it first. */
async function initialize(key: string): Promise<{ status: number; sessionId: string | null; body: string }> {
  const response = await s.request('/mcp', {
    key,
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: {
        protocolVersion: '2025-06-18',
        capabilities: {},
        clientInfo: { name: 'sandstream-test', version: '1.0.0' },
      },
    }),
  });
  return {
    status: response.status,
    sessionId: response.headers.get('mcp-session-id'),
    body: await response.text(),
  };
}

async function end(key: string, sessionId: string): Promise<number> {
  const response = await s.request('/mcp', {
    key,
    method: 'DELETE',
    headers: { 'mcp-session-id': sessionId },
  });
  await response.body?.cancel();
  return response.status;
}

describe('MCP sessions per API replica', () => {
  it("refuses a key's session past its limit, and any past the replica's, naming the setting; an ended one frees its place", async () => {
    const first = await initialize(keys.acme);
    const second = await initialize(keys.acme);
    expect([first.status, second.status], first.body).toEqual([200, 200]);
    expect(first.sessionId).toMatch(/\S/);

    const third = await initialize(keys.acme);
    expect(third.status).toBe(429);
    expect(JSON.parse(third.body).error.message).toMatch(
      /this key holds its limit of 2 MCP sessions .*API_MCP_MAX_SESSIONS_PER_KEY/,
    );

    // Another key still has room, up to the replica's limit of 3.
    const other = await initialize(keys.globex);
    expect(other.status, other.body).toBe(200);
    const past = await initialize(keys.globex);
    expect(past.status).toBe(429);
    expect(JSON.parse(past.body).error.message).toMatch(
      /this API replica holds its limit of 3 MCP sessions \(API_MCP_MAX_SESSIONS\)/,
    );

    // Ending one gives its key (and the replica) room again.
    expect(await end(keys.acme, first.sessionId ?? '')).toBe(200);
    const again = await initialize(keys.acme);
    expect(again.status, again.body).toBe(200);

    for (const [key, opened] of [
      [keys.acme, second],
      [keys.globex, other],
      [keys.acme, again],
    ] as const)
      await end(key, opened.sessionId ?? '');
  });
});
