import { storedKey } from './session';

/** An error answer of the API (RFC 9457 problem details), or a network failure. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export interface RequestOptions {
  method?: string;
  body?: BodyInit;
  contentType?: string;
  accept?: string;
  signal?: AbortSignal;
  /** A key to try instead of the stored one (sign-in). */
  key?: string;
  headers?: Record<string, string>;
}

/** fetch() against the API on this origin with the bearer key; an error answer throws ApiError. */
export async function request(path: string, options: RequestOptions = {}): Promise<Response> {
  const headers: Record<string, string> = { ...options.headers };
  const key = options.key ?? storedKey();
  if (key) headers.authorization = `Bearer ${key}`;
  if (options.contentType) headers['content-type'] = options.contentType;
  if (options.accept) headers.accept = options.accept;
  const response = await fetch(path, {
    method: options.method ?? 'GET',
    headers,
    ...(options.body !== undefined ? { body: options.body } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
  });
  if (!response.ok) throw new ApiError(response.status, await problemText(response));
  return response;
}

export async function getJson<T>(path: string, options: RequestOptions = {}): Promise<T> {
  const response = await request(path, { accept: 'application/json', ...options });
  return (await response.json()) as T;
}

/** A JSON POST (or another method) with a JSON body; answers the JSON reply, or null when empty. */
export async function sendJson<T>(method: string, path: string, body?: unknown): Promise<T | null> {
  const response = await request(path, {
    method,
    ...(body !== undefined ? { body: JSON.stringify(body), contentType: 'application/json' } : {}),
  });
  const text = await response.text();
  return text ? (JSON.parse(text) as T) : null;
}

async function problemText(response: Response): Promise<string> {
  const text = await response.text().catch(() => '');
  try {
    const problem = JSON.parse(text) as { title?: string; detail?: string };
    return problem.detail ?? problem.title ?? `${response.status} ${response.statusText}`;
  } catch {
    return text || `${response.status} ${response.statusText}`;
  }
}

export const enc = encodeURIComponent;
