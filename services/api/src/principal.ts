import { randomBytes } from 'node:crypto';
import type { ApiKeyInfo, ApiKeyStore, JobRecord, KeySpace, RedisClient } from '@sandstream/bus';
import { z } from 'zod';
import { HttpProblem } from './problem.js';

/** Who a request acts as: a key's tenant (an admin key sees every tenant), or anonymous `default`. */
export const PrincipalSchema = z.object({
  keyId: z.string(),
  tenant: z.string(),
  admin: z.boolean(),
  /** A sandbox's E2B access token: the one sandbox (internal id) it opens (e2b-sandbox-tokens.ts). */
  sandbox: z.string().optional(),
});
export type Principal = z.infer<typeof PrincipalSchema>;

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | undefined;
    /** The rate limit and the route's ownership check, started in onRequest (plugins/request-gate.ts). */
    gate: Promise<void> | undefined;
    /** The job record of the route's `:id`, read beside the gate (routes with `prefetch: 'job'`). */
    prefetched: Promise<JobRecord | null> | undefined;
  }
  interface FastifyContextConfig {
    /** The `:id` of this route must name a record of this kind the caller may see (else 404). */
    access?: 'sandbox' | 'job' | 'any';
    /**
     * The handler's command checks the tenant itself, atomically with pushing it (exec): no
     * separate ownership read before it.
     */
    checkedByCommand?: boolean;
    /** Read the `:id`'s job record at once, in the same round trip as the gate. */
    prefetch?: 'job';
  }
}

/**
 * A verified key is trusted this long without asking Redis again. A revocation is published and
 * drops it at once (key-revocations.ts); this bounds what a missed message could leave open.
 */
const KEY_CACHE_MS = 5000;
const KEY_CACHE_MAX = 10_000;
/** A WebSocket ticket is good once, for this long. */
export const TICKET_SECONDS = 30;
/** A browser session (cookie) lasts this long. */
export const SESSION_SECONDS = 3600;
export const SESSION_COOKIE = 'sandstream_session';

const LOOPBACK = new Set(['127.0.0.1', '::1', '::ffff:127.0.0.1']);

/**
 * Resolves the caller of each request: a bearer API key (checked in Redis, cached a few seconds
 * per replica), a one-use WebSocket ticket (browsers cannot set headers on a WebSocket, and a
 * key must never travel in a URL), or, when allowed, anonymous from loopback as `default`.
 */
export class Principals {
  private readonly cache = new Map<string, { info: ApiKeyInfo; until: number }>();

  constructor(
    private readonly options: {
      store: ApiKeyStore;
      redis: RedisClient;
      keys: KeySpace;
      anonymous: 'loopback' | 'off';
      /** How long a verified key is trusted without Redis; default KEY_CACHE_MS. */
      keyCacheMs?: number;
    },
  ) {}

  async resolve(input: {
    authorization: string | undefined;
    ticket: string | undefined;
    /** The session cookie's value, when the request carries one. */
    session?: string | undefined;
    remoteAddress: string | undefined;
  }): Promise<Principal> {
    if (input.authorization !== undefined) {
      const match = /^Bearer ([^\s]{1,200})$/i.exec(input.authorization);
      if (!match) throw unauthorized('Authorization must be "Bearer <API key>"');
      const info = await this.verify(match[1] as string);
      if (!info) throw unauthorized('the API key is unknown or revoked');
      return { keyId: info.id, tenant: info.tenant, admin: info.admin };
    }
    if (input.ticket !== undefined) {
      const raw = /^[A-Za-z0-9_-]{1,64}$/.test(input.ticket)
        ? await this.options.redis.getdel(this.options.keys.api(`ticket:${input.ticket}`))
        : null;
      const parsed = raw === null ? undefined : PrincipalSchema.safeParse(parseJson(raw));
      if (!parsed?.success) throw unauthorized('the ticket is unknown, used or expired');
      return parsed.data;
    }
    if (input.session !== undefined) {
      const raw = /^[A-Za-z0-9_-]{1,64}$/.test(input.session)
        ? await this.options.redis.get(this.options.keys.api(`session:${input.session}`))
        : null;
      const parsed = raw === null ? undefined : PrincipalSchema.safeParse(parseJson(raw));
      if (!parsed?.success) throw unauthorized('the session has ended: sign in again with the API key');
      return parsed.data;
    }
    if (this.options.anonymous === 'loopback' && LOOPBACK.has(input.remoteAddress ?? '')) {
      return { keyId: 'anonymous', tenant: 'default', admin: false };
    }
    throw unauthorized('an API key is needed: Authorization: Bearer <key> (sandstream apikey create)');
  }

  /** A one-use ticket standing for `principal`, for a WebSocket URL (`?ticket=`). */
  async ticket(principal: Principal): Promise<{ ticket: string; expiresInSeconds: number }> {
    const ticket = randomBytes(24).toString('base64url');
    await this.options.redis.set(
      this.options.keys.api(`ticket:${ticket}`),
      JSON.stringify(principal),
      'EX',
      TICKET_SECONDS,
    );
    return { ticket, expiresInSeconds: TICKET_SECONDS };
  }

  /**
   * A session for a browser, standing for `principal` for SESSION_SECONDS: its id goes into an
   * HttpOnly, SameSite=Strict cookie (scripts cannot read it, other sites cannot send it), so a
   * page can open WebSockets and the queue dashboard without ever holding the key.
   */
  async startSession(principal: Principal): Promise<string> {
    const session = randomBytes(24).toString('base64url');
    await this.options.redis.set(
      this.options.keys.api(`session:${session}`),
      JSON.stringify(principal),
      'EX',
      SESSION_SECONDS,
    );
    return session;
  }

  async endSession(session: string): Promise<void> {
    if (/^[A-Za-z0-9_-]{1,64}$/.test(session))
      await this.options.redis.unlink(this.options.keys.api(`session:${session}`));
  }

  /** Drops the cached verification of the key with this id (revoked: key-revocations.ts). */
  forget(keyId: string): void {
    for (const [key, entry] of this.cache) if (entry.info.id === keyId) this.cache.delete(key);
  }

  /** Drops every cached verification (a revocation may have been missed while disconnected). */
  forgetAll(): void {
    this.cache.clear();
  }

  private async verify(key: string): Promise<ApiKeyInfo | null> {
    const now = Date.now();
    const hit = this.cache.get(key);
    if (hit && hit.until > now) return hit.info;
    const info = await this.options.store.verify(key);
    if (!info) {
      this.cache.delete(key);
      return null;
    }
    if (this.cache.size >= KEY_CACHE_MAX) this.cache.clear();
    this.cache.set(key, { info, until: now + (this.options.keyCacheMs ?? KEY_CACHE_MS) });
    return info;
  }
}

function unauthorized(message: string): HttpProblem {
  return new HttpProblem(401, 'unauthorized', message);
}

/** The tenant a request may act on: its own, or (admin) the one it names. */
export function tenantFor(principal: Principal, asked: string | undefined): string {
  if (asked === undefined || asked === principal.tenant) return principal.tenant;
  if (principal.admin) return asked;
  throw new HttpProblem(403, 'forbidden', `tenant: this key acts for tenant ${principal.tenant} only`, [
    { field: 'tenant', rule: `must be ${principal.tenant} (the key's tenant)` },
  ]);
}

/** Whether the principal may see a record of `tenant` (others' are answered 404, never 403). */
export function maySee(principal: Principal, tenant: string): boolean {
  return principal.admin || principal.tenant === tenant;
}

function parseJson(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    return undefined;
  }
}

/** The session cookie's value in a Cookie header, if any. */
export function sessionCookie(header: string | undefined): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const at = part.indexOf('=');
    if (at !== -1 && part.slice(0, at).trim() === SESSION_COOKIE) return part.slice(at + 1).trim();
  }
  return undefined;
}
