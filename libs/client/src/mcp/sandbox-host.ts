import type { LiveSandboxSpecInput, SandboxRecord } from '@sandstream/bus';
import type { SandstreamClient } from '../client.js';
import type { Sandbox } from '../sandbox.js';

/**
 * Where the MCP tools reach sandboxes: the one seam between the tools (shared by `sandstream
 * mcp` and the API's /mcp) and who the caller is. The CLI's host is its SDK client (its
 * connection decides the tenant); the API's resolves ids in the key's tenant, so another
 * tenant's sandbox is simply not found. Ids are always as the caller knows them.
 */
export interface SandboxHost {
  /** Creates a sandbox, resolves once it takes commands; its id. */
  create(spec: LiveSandboxSpecInput): Promise<string>;
  /** A handle on one of the caller's sandboxes (SandboxNotFoundError for any other id, now or on use). */
  sandbox(id: string): Promise<Sandbox>;
  list(labels: Record<string, string> | undefined): Promise<SandboxRecord[]>;
  close(id: string): Promise<SandboxRecord>;
  previewUrl(id: string, port: number, open: boolean): Promise<string>;
  /** An error's message as the caller may read it (the API's ids are shown as its user's). */
  describe?(message: string): string;
}

/** What a create_sandbox naming neither image nor template gets (`sandstream mcp --image / --template`). */
export interface SandboxDefaults {
  image?: string | undefined;
  template?: string | undefined;
}

/**
 * The host of `sandstream mcp`: its SDK client, over Redis or the HTTP API (which applies its own
 * default image when neither these defaults nor the call name one).
 */
export function clientSandboxHost(client: SandstreamClient, defaults: SandboxDefaults = {}): SandboxHost {
  return {
    create: async (spec) => {
      const named =
        spec.image !== undefined || spec.template !== undefined || spec.fromSnapshot !== undefined;
      const filled = named
        ? spec
        : {
            ...spec,
            ...(defaults.template !== undefined ? { template: defaults.template } : {}),
            ...(defaults.template === undefined && defaults.image !== undefined
              ? { image: defaults.image }
              : {}),
          };
      return (await client.sandboxes.create(filled)).id;
    },
    // No round trip: a command or file call to an unknown id is refused as not found, in the
    // same request that would run it (what keeps run_command as cheap as exec).
    sandbox: async (id) => client.sandboxes.handle(id),
    list: (labels) => client.sandboxes.list(labels ? { labels } : {}),
    close: (id) => client.sandboxes.close(id),
    previewUrl: (id, port, open) => client.sandboxes.handle(id).ports.url(port, { public: open }),
  };
}
