import { request as httpRequest, type IncomingMessage } from 'node:http';
import type { LookupFunction } from 'node:net';

/**
 * Resolves every name to the loopback: a host-form preview (`8000-x.localhost`) is asked at its
 * real URL and Host, whatever the machine's resolver does with `*.localhost`.
 */
export const loopbackLookup = ((
  _host: string,
  options: { all?: boolean },
  callback: (...args: unknown[]) => void,
) => {
  if (options?.all) callback(null, [{ address: '127.0.0.1', family: 4 }]);
  else callback(null, '127.0.0.1', 4);
}) as unknown as LookupFunction;

/** A GET (or other method) of `url` through the loopback, its answer as a stream. */
export function rawRequest(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: Buffer | AsyncIterable<Buffer> } = {},
): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, {
      method: options.method ?? 'GET',
      headers: options.headers,
      lookup: loopbackLookup,
    });
    req.once('response', resolve);
    req.once('error', reject);
    const body = options.body;
    if (body === undefined) req.end();
    else if (Buffer.isBuffer(body)) req.end(body);
    else
      void (async () => {
        for await (const chunk of body) if (!req.write(chunk)) await new Promise((r) => req.once('drain', r));
        req.end();
      })().catch(reject);
  });
}

/** The answer read whole, as text. */
export async function textOf(response: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of response) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** The answer's length, counted as it streams (nothing kept). */
export async function countBytes(response: IncomingMessage): Promise<number> {
  let bytes = 0;
  for await (const chunk of response) bytes += (chunk as Buffer).length;
  return bytes;
}

/** The Cookie header a Set-Cookie answer asks for (name=value only). */
export function cookieOf(response: IncomingMessage): string {
  const set = response.headers['set-cookie'] ?? [];
  return set.map((c) => c.split(';')[0]).join('; ');
}
