import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { principalOf } from '../access.js';
import type { ApiContext } from '../api-context.js';
import type { PreviewConfig } from '../preview-config.js';
import { apiBaseOf } from '../routes/sandbox-ports.js';
import type { McpSessions } from './mcp-sessions.js';
import { tenantSandboxHost } from './tenant-sandbox-host.js';

/** A JSON-RPC error answer outside any session (the transport answers everything within one). */
function rpcError(reply: FastifyReply, status: number, code: number, message: string): FastifyReply {
  return reply
    .code(status)
    .type('application/json')
    .send({ jsonrpc: '2.0', error: { code, message }, id: null });
}

/**
 * `/mcp`: the MCP tools over Streamable HTTP (POST for requests, GET for the server's stream,
 * DELETE to end the session), authenticated like every route (the API key as a bearer token)
 * and scoped to the key's tenant. The MCP SDK's transport answers on the raw response.
 */
export function mcpRoutes(
  ctx: ApiContext,
  preview: PreviewConfig,
  sessions: McpSessions,
): FastifyPluginAsync {
  return async (app) => {
    const handle = async (request: FastifyRequest, reply: FastifyReply) => {
      const principal = principalOf(request);
      const sessionId = request.headers['mcp-session-id'];
      let transport: Awaited<ReturnType<McpSessions['open']>> | undefined;
      if (typeof sessionId === 'string') {
        transport = sessions.get(sessionId, principal, reply.raw);
        if (!transport)
          return rpcError(
            reply,
            404,
            -32001,
            'MCP session not found (ended, or opened elsewhere): initialize a new one',
          );
      } else if (request.method === 'POST' && isInitializeRequest(request.body)) {
        const refused = sessions.refusal(principal);
        // 429 as for a key's open requests past its limit (API_MAX_OPEN_REQUESTS_PER_KEY).
        if (refused) return rpcError(reply, 429, -32000, refused);
        transport = await sessions.open(
          tenantSandboxHost(ctx, principal, preview, apiBaseOf(request, preview)),
          principal,
        );
      } else {
        return rpcError(reply, 400, -32000, 'no Mcp-Session-Id header: start with an initialize request');
      }
      reply.hijack();
      await transport.handleRequest(request.raw, reply.raw, request.body);
      return reply;
    };
    const schema = { hide: true };
    app.post('/mcp', { schema }, handle);
    app.get('/mcp', { schema }, handle);
    app.delete('/mcp', { schema }, handle);
  };
}
