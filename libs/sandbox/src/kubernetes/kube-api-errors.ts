import { ApiException } from '@kubernetes/client-node';

/** The HTTP status of a failed API call, or undefined for a network-level failure. */
export function statusCodeOf(err: unknown): number | undefined {
  if (err instanceof ApiException) return err.code;
  if (typeof err === 'object' && err !== null) {
    const code =
      (err as { code?: unknown; statusCode?: unknown }).statusCode ?? (err as { code?: unknown }).code;
    if (typeof code === 'number') return code;
  }
  return undefined;
}

/** The API server's own words (the Status object's message), not the client's wrapper text. */
export function apiMessageOf(err: unknown): string {
  if (err instanceof ApiException) {
    const body: unknown = err.body;
    if (
      typeof body === 'object' &&
      body !== null &&
      typeof (body as { message?: unknown }).message === 'string'
    ) {
      return (body as { message: string }).message;
    }
    if (typeof body === 'string') {
      try {
        const parsed: unknown = JSON.parse(body);
        if (typeof parsed === 'object' && parsed !== null && 'message' in parsed)
          return String(parsed.message);
      } catch {
        if (body.trim()) return body.trim();
      }
    }
    return `HTTP ${err.code}`;
  }
  return err instanceof Error ? err.message : String(err);
}

export const isNotFound = (err: unknown) => statusCodeOf(err) === 404;
export const isAlreadyExists = (err: unknown) => statusCodeOf(err) === 409;
/** ResourceQuota admission refuses with 403 and "exceeded quota" in the message. */
export const isQuotaExceeded = (err: unknown) =>
  statusCodeOf(err) === 403 && /exceeded quota/i.test(apiMessageOf(err));

/** Runs a delete and treats "already gone" as success, so cleanup is idempotent. */
export async function ignoreNotFound(action: () => Promise<unknown>): Promise<void> {
  try {
    await action();
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
}
