import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { formatIssues } from '@sandstream/wire';
import { z } from 'zod';
import { UsageError } from './flags.js';

/**
 * Where the CLI finds Redis and the namespace. `npm start` runs its own redis-server (with a
 * generated admin password) and writes its URL to `<repo>/.cache/sandstream/local.json`
 * (scripts/local-redis.mjs), so `npx sandstream …` works after it with no flags.
 *
 * URL: --redis-url > $REDIS_URL > local.json > redis://127.0.0.1:6379.
 * Namespace: --namespace > $SANDSTREAM_NAMESPACE > local.json > sandstream.
 * Log archive (NATS): --nats-url > $NATS_URL > local.json's natsUrl, the last only when the Redis
 * URL came from local.json too: an archive of the local installation would otherwise be read
 * for a job of another one. None: no archive.
 */
export const LOCAL_FILE = join('.cache', 'sandstream', 'local.json');
export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';
export const DEFAULT_NAMESPACE = 'sandstream';

/** The schemes nats.js connects with, as the services' NATS_URL accepts them. */
export const NatsUrlSchema = z
  .string()
  .regex(/^(nats|tls|wss?):\/\//, 'a NATS URL starts with nats://, tls://, ws:// or wss://');

/**
 * Not strict: the file is written by a program, not a person, and a later version of
 * `npm start` may add fields that an older CLI must still accept.
 */
export const LocalConnectionFileSchema = z.object({
  redisUrl: z.string().regex(/^rediss?:\/\//, 'redisUrl must start with redis:// or rediss://'),
  namespace: z.string().min(1),
  pid: z.number().int().positive(),
  /** Written when `npm start` runs its embedded nats-server (the log archive). */
  natsUrl: NatsUrlSchema.optional(),
});
export type LocalConnectionFile = z.infer<typeof LocalConnectionFileSchema>;

export interface ConnectionInputs {
  flags: { redisUrl?: string | undefined; namespace?: string | undefined; natsUrl?: string | undefined };
  env: NodeJS.ProcessEnv;
  /** Directories to walk up from, looking for LOCAL_FILE (the cwd, then the CLI's own place). */
  searchFrom: string[];
}

export interface ResolvedConnection {
  redisUrl: string;
  namespace: string;
  /** The log archive's NATS, when one is configured. */
  natsUrl?: string;
  /** The local.json that supplied the URL, named in a "cannot reach" error. */
  urlFile?: string;
  /** One line for stderr when a local.json was found but could not be used. */
  warning?: string;
}

/** The first LOCAL_FILE found walking up from each directory in turn. */
export function findLocalFile(searchFrom: readonly string[]): string | undefined {
  for (const start of searchFrom) {
    for (let dir = resolve(start); ; dir = dirname(dir)) {
      const candidate = join(dir, LOCAL_FILE);
      if (existsSync(candidate)) return candidate;
      if (dirname(dir) === dir) break;
    }
  }
  return undefined;
}

export function readLocalFile(path: string): { file: LocalConnectionFile } | { problem: string } {
  let data: unknown;
  try {
    data = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    return { problem: (err as Error).message };
  }
  const parsed = LocalConnectionFileSchema.safeParse(data);
  return parsed.success ? { file: parsed.data } : { problem: formatIssues(parsed.error) };
}

/** Empty variables count as unset, as a shell user who wrote `REDIS_URL= cmd` means. */
function given(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

export function resolveConnection(inputs: ConnectionInputs): ResolvedConnection {
  const url = given(inputs.flags.redisUrl) ?? given(inputs.env.REDIS_URL);
  const namespace = given(inputs.flags.namespace) ?? given(inputs.env.SANDSTREAM_NAMESPACE);
  const natsUrl = given(inputs.flags.natsUrl) ?? given(inputs.env.NATS_URL);
  if (url !== undefined && namespace !== undefined)
    return { redisUrl: url, namespace, ...(natsUrl ? { natsUrl } : {}) };
  // Only read when it can contribute: an explicit URL and namespace never depend on the file.
  const path = findLocalFile(inputs.searchFrom);
  const local = path === undefined ? undefined : readLocalFile(path);
  const file = local && 'file' in local ? local.file : undefined;
  const archive = natsUrl ?? (url === undefined ? file?.natsUrl : undefined);
  return {
    redisUrl: url ?? file?.redisUrl ?? DEFAULT_REDIS_URL,
    namespace: namespace ?? file?.namespace ?? DEFAULT_NAMESPACE,
    ...(archive ? { natsUrl: archive } : {}),
    ...(url === undefined && file && path ? { urlFile: path } : {}),
    ...(local && 'problem' in local ? { warning: `ignoring ${path}: ${local.problem}` } : {}),
  };
}

export { redactUrl } from './redact-url.js';

export interface ApiConnection {
  url: string;
  apiKey?: string;
}

/**
 * The HTTP API to talk to instead of Redis: --url > $SANDSTREAM_URL, with --api-key >
 * $SANDSTREAM_API_KEY (a flag is visible in `ps`; the variable is the safer place for a key).
 * None: the CLI talks to Redis. A Redis flag with an API URL is refused rather than one of them
 * silently ignored.
 */
export function resolveApiConnection(
  inputs: Omit<ConnectionInputs, 'searchFrom' | 'flags'> & {
    flags: ConnectionInputs['flags'] & { url?: string | undefined; apiKey?: string | undefined };
  },
): ApiConnection | undefined {
  const url = given(inputs.flags.url) ?? given(inputs.env.SANDSTREAM_URL);
  const apiKey = given(inputs.flags.apiKey) ?? given(inputs.env.SANDSTREAM_API_KEY);
  if (url === undefined) {
    if (given(inputs.flags.apiKey) !== undefined)
      throw new UsageError('--api-key needs --url (or $SANDSTREAM_URL): the HTTP API it is for');
    return undefined;
  }
  if (!/^https?:\/\/[^/]/.test(url))
    throw new UsageError(`--url / SANDSTREAM_URL "${url}" is not an http:// or https:// URL`);
  const mixed = (['redisUrl', 'namespace'] as const).filter((k) => given(inputs.flags[k]) !== undefined);
  if (mixed.length > 0) {
    const names = mixed.map((k) => (k === 'redisUrl' ? '--redis-url' : '--namespace')).join(' and ');
    throw new UsageError(`--url (the HTTP API) does not go with ${names} (Redis): give one or the other`);
  }
  return { url, ...(apiKey ? { apiKey } : {}) };
}
