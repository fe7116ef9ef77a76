import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import type { KeySpace } from './key-space.js';
import type { RedisClient } from './redis-connection.js';

/** How long a preview URL's token opens it (its cookie lasts as long). */
export const PREVIEW_TOKEN_SECONDS = 24 * 3600;

/** What a preview token is bound to: one sandbox, one port, until `e` (epoch seconds). */
const PreviewClaimsSchema = z.strictObject({
  s: z.string().min(1).max(128),
  p: z.number().int().min(1).max(65535),
  e: z.number().int(),
});
export type PreviewClaims = z.infer<typeof PreviewClaimsSchema>;

/**
 * A signed preview token: `base64url(claims JSON).base64url(HMAC-SHA256)`, with a secret kept
 * in Redis (one per installation, made on first use) so that every API replica and an SDK over
 * Redis sign and check the same way. A browser gets it in `?token=` once; the API answers with
 * a cookie holding it, scoped to the preview's host (or path), so the app's own requests and its
 * WebSocket upgrades carry it without the API key ever reaching the page.
 */
export function signPreviewToken(secret: Buffer, claims: PreviewClaims): string {
  const body = Buffer.from(JSON.stringify(PreviewClaimsSchema.parse(claims))).toString('base64url');
  return `${body}.${mac(secret, body)}`;
}

/** Why a token does not open a sandbox's port, or undefined when it does. */
export function previewTokenRefusal(
  secret: Buffer,
  token: string,
  want: { sandboxId: string; port: number; nowSeconds: number },
): string | undefined {
  const [body, signature, extra] = token.split('.');
  if (!body || !signature || extra !== undefined) return 'the preview token is malformed';
  const expected = Buffer.from(mac(secret, body));
  const given = Buffer.from(signature);
  if (expected.length !== given.length || !timingSafeEqual(expected, given))
    return 'the preview token is not valid';
  let claims: PreviewClaims;
  try {
    claims = PreviewClaimsSchema.parse(JSON.parse(Buffer.from(body, 'base64url').toString('utf8')));
  } catch {
    return 'the preview token is malformed';
  }
  if (claims.s !== want.sandboxId || claims.p !== want.port)
    return `the preview token is for another sandbox or port, not port ${want.port} of this sandbox`;
  if (claims.e <= want.nowSeconds) return 'the preview token has expired';
  return undefined;
}

function mac(secret: Buffer, body: string): string {
  return createHmac('sha256', secret).update(body).digest('base64url');
}

/** Secrets already read, per Redis client and key: the secret never changes once made. */
const knownSecrets = new WeakMap<RedisClient, Map<string, Buffer>>();

/** The installation's preview signing secret (made once, atomically, by whoever asks first). */
export async function previewSecret(redis: RedisClient, keys: KeySpace): Promise<Buffer> {
  const key = keys.api('preview-secret');
  const known = knownSecrets.get(redis)?.get(key);
  if (known) return known;
  await redis.set(key, randomBytes(32).toString('base64url'), 'NX');
  const value = await redis.get(key);
  if (!value) throw new Error('the preview secret could not be read back from Redis');
  const secret = Buffer.from(value, 'base64url');
  const perClient = knownSecrets.get(redis) ?? new Map<string, Buffer>();
  perClient.set(key, secret);
  knownSecrets.set(redis, perClient);
  return secret;
}

/**
 * The sandbox a token names, read without checking it: only to pick which record a path-form
 * request means (a tenant's internal id, tenant-ids.ts); the token is checked in full after.
 */
export function previewTokenSandbox(token: string): string | undefined {
  const [body] = token.split('.');
  if (!body) return undefined;
  try {
    const claims = PreviewClaimsSchema.safeParse(JSON.parse(Buffer.from(body, 'base64url').toString('utf8')));
    return claims.success ? claims.data.s : undefined;
  } catch {
    return undefined;
  }
}
