/** What `connect()` of the `nats` package needs from a URL (it ignores credentials in the URL itself). */
export interface NatsUrlOptions {
  servers: string;
  user?: string;
  pass?: string;
  token?: string;
}

/**
 * Splits `nats://user:password@host:port` (or `nats://token@host:port`) into the server and the
 * credentials, so NATS_URL can carry them like REDIS_URL does (a Kubernetes Secret holds one URL).
 */
export function natsUrlOptions(url: string): NatsUrlOptions {
  const parsed = new URL(url);
  const user = decodeURIComponent(parsed.username);
  const pass = decodeURIComponent(parsed.password);
  parsed.username = '';
  parsed.password = '';
  const servers = parsed.toString().replace(/\/$/, '');
  if (!user) return { servers };
  return pass ? { servers, user, pass } : { servers, token: user };
}
