/**
 * The URL with its password masked, for messages: local.json carries a real one. A module of its
 * own, free of zod, so the lean exec bundle (lean-exec/) uses this very function.
 */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (!parsed.password) return url;
    parsed.password = '***';
    return parsed.toString();
  } catch {
    return url;
  }
}
