import { createHash, randomBytes } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { ApiContext } from '../api-context.js';
import { type Principal, PrincipalSchema } from '../principal.js';
import { HttpProblem } from '../problem.js';

/**
 * Per-sandbox access tokens: what the E2B create / connect answer gives as `envdAccessToken`,
 * which the SDK sends back as `X-Access-Token` on the sandbox's in-sandbox calls. A token opens
 * those calls for its one sandbox and nothing else (not the control plane, not our /v1, not
 * another sandbox of the tenant), so handing a sandbox's connection to a browser or a worker
 * does not hand over the tenant's key. Stored hashed in Redis; each use keeps it alive.
 */
const TOKEN_PREFIX = 'e2bs_';
/** Unused this long, a token lapses (a sandbox lives at most 24 h unless extended; each call renews it). */
const TOKEN_TTL_SECONDS = 25 * 3600;
/** The loopback caller's key id where anonymous access is on (principal.ts): no key to revoke. */
const ANONYMOUS = 'anonymous';
/** The in-sandbox API's paths, the only ones a token opens. */
const IN_SANDBOX_PATH = /^\/(process\.Process\/|filesystem\.Filesystem\/|files$|health$)/;

export function isSandboxToken(value: unknown): value is string {
  return typeof value === 'string' && value.startsWith(TOKEN_PREFIX);
}

export function isInSandboxPath(path: string): boolean {
  return IN_SANDBOX_PATH.test(path);
}

export class E2bSandboxTokens {
  constructor(private readonly ctx: Pick<ApiContext, 'redis' | 'keys'>) {}

  private key(token: string): string {
    return this.ctx.keys.api(`e2b:token:${createHash('sha256').update(token).digest('hex')}`);
  }

  /** A new token for `sandboxId` (internal id), acting as `principal`'s tenant there. */
  async mint(principal: Principal, sandboxId: string): Promise<string> {
    const token = `${TOKEN_PREFIX}${randomBytes(24).toString('base64url')}`;
    const scoped: Principal = {
      keyId: principal.keyId,
      tenant: principal.tenant,
      admin: false,
      sandbox: sandboxId,
    };
    await this.ctx.redis.set(this.key(token), JSON.stringify(scoped), 'EX', TOKEN_TTL_SECONDS);
    return token;
  }

  /** The principal of a request that carries a token (401 when unknown, lapsed, or on another path). */
  async principalOf(headers: IncomingHttpHeaders, path: string): Promise<Principal> {
    const token = headers['x-access-token'] as string;
    if (!isInSandboxPath(path))
      throw new HttpProblem(401, 'unauthorized', "a sandbox's access token opens only its in-sandbox calls");
    const key = this.key(token);
    const [[, raw]] = (await this.ctx.redis.multi().get(key).expire(key, TOKEN_TTL_SECONDS).exec()) as [
      [Error | null, string | null],
    ];
    const parsed = raw === null ? undefined : PrincipalSchema.safeParse(JSON.parse(raw));
    if (!parsed?.success || parsed.data.sandbox === undefined)
      throw new HttpProblem(401, 'unauthorized', "the sandbox's access token is unknown or lapsed");
    // A token is worth no more than the key that minted it: revoking the key ends its tokens.
    if (
      parsed.data.keyId !== ANONYMOUS &&
      !(await this.ctx.redis.hexists(this.ctx.keys.apiKeys, parsed.data.keyId))
    ) {
      await this.ctx.redis.del(key);
      throw new HttpProblem(
        401,
        'unauthorized',
        "the key that opened this sandbox's access token was revoked",
      );
    }
    return parsed.data;
  }
}
