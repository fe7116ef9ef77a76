import type { SandboxRecord } from '@sandstream/bus';
import { strictObject } from '@sandstream/wire';
import { z } from 'zod';
import { parseOptions, SandstreamOptionsError } from './client-options.js';
import { SandboxClosedError } from './sandbox-errors.js';
import type { SandboxTransport } from './transport.js';

export const PortNumberSchema = z
  .number({ error: 'port must be a number' })
  .int('port must be a whole number')
  .min(1, 'port must be at least 1')
  .max(65535, 'port must be at most 65535');

export const PortUrlOptionsSchema = strictObject({
  /** Open the port to anyone who has the URL (no key, no token); default private. */
  public: z.boolean().optional(),
  /**
   * `path` (default): `{api}/v1/sandboxes/{id}/proxy/{port}/`; `host`:
   * `{scheme}://{port}-{label}.{previewDomain}:{apiPort}/`, for apps that must live at `/`.
   */
  form: z.enum(['path', 'host']).optional(),
});
export type PortUrlOptions = z.input<typeof PortUrlOptionsSchema>;
export type PortUrlRequest = { public: boolean; form: 'path' | 'host' };

/** What a preview URL is made of: the API's public base, the sandbox, and for a private one its token. */
export interface PreviewUrlParts {
  /** The API as the URL's user reaches it, e.g. http://localhost:8080. */
  apiBase: string;
  /** SANDSTREAM_PREVIEW_DOMAIN (default `localhost`). */
  domain: string;
  sandboxId: string;
  /** previewLabel(tenant, id) from libs/bus. */
  label: string;
  port: number;
  form: 'path' | 'host';
  token: string | undefined;
}

/**
 * The URL itself, composed the same way by services/api and by the SDK over Redis. A private
 * URL carries its `?token=`, so that it opens as printed; the proxy then keeps it in a cookie.
 */
export function composePreviewUrl(parts: PreviewUrlParts): string {
  const base = new URL(parts.apiBase);
  const url =
    parts.form === 'host'
      ? new URL(
          `${base.protocol}//${parts.port}-${parts.label}.${parts.domain}${base.port ? `:${base.port}` : ''}/`,
        )
      : new URL(
          `${base.pathname.replace(/\/+$/, '')}/v1/sandboxes/${encodeURIComponent(parts.sandboxId)}/proxy/${parts.port}/`,
          base,
        );
  if (parts.token) url.searchParams.set('token', parts.token);
  return url.toString();
}

/** The sandbox is not ready yet (queued or creating): its ports cannot be reached. */
export class SandboxNotReadyError extends Error {
  override readonly name = 'SandboxNotReadyError';
}

/** Nothing answers on the sandbox's port a preview URL proxies to (the API's 502). */
export class SandboxPortUnreachableError extends Error {
  override readonly name = 'SandboxPortUnreachableError';
  constructor(
    readonly port: number | undefined,
    message: string,
  ) {
    super(message);
  }
}

/** Throws unless the sandbox is ready: not yet (SandboxNotReadyError, 409) or no more (SandboxClosedError). */
export function requireReachable(record: SandboxRecord): void {
  if (record.state === 'queued' || record.state === 'creating')
    throw new SandboxNotReadyError(
      `sandbox ${record.id} is not ready yet (${record.state}): its ports cannot be reached`,
    );
  if (record.state !== 'ready') throw new SandboxClosedError(record.id, record.state, record.reason);
}

/**
 * The ports a sandbox serves on, reached through the API's preview proxy (sandbox.ports). Over
 * Redis the SDK composes the URL itself: it needs the API's public base URL (client option
 * `previewUrl`, else SANDSTREAM_API_URL) since the API is the one proxy.
 */
export class SandboxPorts {
  constructor(
    private readonly id: string,
    private readonly transport: SandboxTransport,
  ) {}

  /** A URL that opens `port` of the sandbox in a browser or any HTTP client. */
  async url(port: number, options: PortUrlOptions = {}): Promise<string> {
    const checked = PortNumberSchema.safeParse(port);
    if (!checked.success)
      throw new SandstreamOptionsError(`port: ${checked.error.issues[0]?.message ?? 'invalid'}`);
    const parsed = parseOptions(PortUrlOptionsSchema, options, 'port url options');
    return this.transport.portUrl(this.id, checked.data, {
      public: parsed.public ?? false,
      form: parsed.form ?? 'path',
    });
  }
}
