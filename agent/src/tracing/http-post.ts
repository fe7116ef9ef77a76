/**
 * POSTs a body and resolves with the HTTP status, or rejects on a network error or timeout.
 *
 * node:http rather than fetch: the agent is a fresh process per sandbox, and fetch's first call
 * costs about three times the CPU (it loads undici), on every job. Loaded lazily, so an agent
 * with tracing off never pays for the module at all.
 */
export async function postBody(
  url: string,
  body: string,
  headers: Record<string, string>,
  timeoutMs: number,
): Promise<number> {
  const target = new URL(url);
  const { request } = target.protocol === 'https:' ? await import('node:https') : await import('node:http');
  return new Promise<number>((resolve, reject) => {
    const req = request(
      target,
      {
        method: 'POST',
        headers: { ...headers, 'content-length': Buffer.byteLength(body) },
        timeout: timeoutMs,
      },
      (res) => {
        // Drain the reply; only the status matters.
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}
