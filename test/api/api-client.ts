import { expect } from 'vitest';
import type { ApiStack } from '../helpers/api-stack.js';
import { OpenApiDocument } from '../helpers/openapi-check.js';

export interface Answer<T = unknown> {
  status: number;
  type: string;
  body: T;
}

/**
 * Requests against the API whose every answer is checked against its OpenAPI document: the
 * status must be declared for the operation and a JSON body must match its schema. A problem
 * answer must be application/problem+json.
 */
export function apiClient(stack: Pick<ApiStack, 'request'>, doc: OpenApiDocument) {
  return async function call<T = unknown>(
    method: string,
    path: string,
    options: {
      key?: string;
      json?: unknown;
      body?: string | Uint8Array;
      headers?: Record<string, string>;
    } = {},
  ): Promise<Answer<T>> {
    const headers: Record<string, string> = { ...options.headers };
    let body = options.body;
    if (options.json !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(options.json);
    }
    const res = await stack.request(path, {
      method,
      headers,
      key: options.key,
      ...(body !== undefined ? { body } : {}),
    });
    const type = res.headers.get('content-type') ?? '';
    const text = await res.text();
    const parsed = type.includes('json') && text !== '' ? (JSON.parse(text) as T) : (text as T);
    if (res.status >= 400)
      expect(type, `${method} ${path} → ${res.status} ${text}`).toContain('application/problem+json');
    expect(doc.check(method, path, res.status, type.includes('json') ? parsed : undefined)).toEqual([]);
    return { status: res.status, type, body: parsed };
  };
}

/** Server-sent events of a response body, parsed as they come. */
export async function* sseEvents(
  res: Response,
): AsyncGenerator<{ id: string | undefined; event: string; data: unknown }> {
  const reader = res.body?.getReader();
  if (!reader) return;
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end = buffer.indexOf('\n\n');
    while (end !== -1) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      end = buffer.indexOf('\n\n');
      let id: string | undefined;
      let event = 'message';
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('id: ')) id = line.slice(4);
        else if (line.startsWith('event: ')) event = line.slice(7);
        else if (line.startsWith('data: ')) data.push(line.slice(6));
      }
      if (data.length > 0) yield { id, event, data: JSON.parse(data.join('\n')) };
    }
  }
}

/** apiClient with the document the stack itself serves at /openapi.json. */
export async function servedApiClient(stack: ApiStack) {
  const served = await fetch(`${stack.url}/openapi.json`);
  return apiClient(stack, await OpenApiDocument.load((await served.json()) as Record<string, unknown>));
}
