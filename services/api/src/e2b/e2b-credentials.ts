import type { IncomingHttpHeaders } from 'node:http';

/**
 * The e2b SDK sends the API key as `X-API-KEY` to the control plane, and to the in-sandbox API
 * the `envdAccessToken` our create answered, as `X-Access-Token`. That token is the sandbox's own
 * (e2b-sandbox-tokens.ts, resolved before this is asked); an API key sent in its place, as a
 * hand-made handle may, becomes the bearer key every other route reads, so its requests go
 * through the same authentication, rate limit and tenancy. An in-sandbox call may also carry a
 * Basic `Authorization` naming the user to run as (no secret in it): the token wins over it.
 */
export function e2bAuthorization(headers: IncomingHttpHeaders): string | undefined {
  const token = headers['x-access-token'] ?? headers['x-api-key'];
  if (typeof token === 'string' && token !== '') return `Bearer ${token}`;
  return headers.authorization;
}
