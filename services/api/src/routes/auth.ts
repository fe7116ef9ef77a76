import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { principalOf } from '../access.js';
import type { ApiContext } from '../api-context.js';
import {
  PrincipalSchema,
  SESSION_COOKIE,
  SESSION_SECONDS,
  sessionCookie,
  TICKET_SECONDS,
} from '../principal.js';
import { HttpProblem } from '../problem.js';

/**
 * What a browser needs, since it cannot put a bearer key on a WebSocket or on the pages of the
 * queue dashboard: a one-use ticket for one WebSocket URL, or a session cookie (HttpOnly,
 * SameSite=Strict). Both are obtained with the key; the key itself never goes into a URL.
 */
export function authRoutes(ctx: ApiContext): FastifyPluginAsyncZod {
  return async (app) => {
    const tags = ['auth'];
    /** Only a key may open a session or get a ticket: not anonymous access, not another session. */
    const keyHolder = (request: FastifyRequest) => {
      const principal = principalOf(request);
      if (principal.keyId === 'anonymous' || request.headers.authorization === undefined) {
        throw new HttpProblem(401, 'unauthorized', 'send the API key as Authorization: Bearer <key>');
      }
      return principal;
    };

    // Who the key is: what the web console shows beside its pages, and whether it lists every
    // tenant (an admin key) or its own.
    app.get(
      '/me',
      {
        schema: {
          tags,
          summary: 'Who this request acts as: its tenant, whether it is an admin key, and the key id',
          response: { 200: PrincipalSchema },
        },
      },
      async (request) => {
        const { keyId, tenant, admin } = principalOf(request);
        return { keyId, tenant, admin };
      },
    );

    app.post(
      '/ws-ticket',
      {
        schema: {
          tags,
          summary: `A one-use ticket for a WebSocket URL (?ticket=), valid ${TICKET_SECONDS} s`,
          response: {
            201: z.object({ ticket: z.string(), expiresInSeconds: z.number() }),
          },
        },
      },
      async (request, reply) => reply.code(201).send(await ctx.principals.ticket(keyHolder(request))),
    );

    app.post(
      '/session',
      {
        schema: {
          tags,
          summary: `Exchange the key for a session cookie (HttpOnly, SameSite=Strict, ${SESSION_SECONDS} s) for a browser`,
          response: { 204: z.null() },
        },
      },
      async (request, reply) => {
        const session = await ctx.principals.startSession(keyHolder(request));
        return setCookie(request, reply, session, SESSION_SECONDS).code(204).send(null);
      },
    );

    app.delete(
      '/session',
      {
        schema: {
          tags,
          summary: 'End the session and clear its cookie',
          response: { 204: z.null() },
        },
      },
      async (request, reply) => {
        const session = sessionCookie(request.headers.cookie);
        if (session) await ctx.principals.endSession(session);
        return setCookie(request, reply, '', 0).code(204).send(null);
      },
    );
  };
}

function setCookie(
  request: FastifyRequest,
  reply: FastifyReply,
  value: string,
  maxAge: number,
): FastifyReply {
  // Secure where the request came over TLS (plain http on localhost would never send it back).
  const secure = request.protocol === 'https' ? '; Secure' : '';
  return reply.header(
    'set-cookie',
    `${SESSION_COOKIE}=${value}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${maxAge}${secure}`,
  );
}
