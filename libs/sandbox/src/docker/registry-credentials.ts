import { readFile } from 'node:fs/promises';
import { formatIssues } from '@sandstream/wire';
import { z } from 'zod';

/**
 * One registry's entry of a Docker client configuration file (`config.json`, as `docker login`
 * writes it): `auth` is base64 of `user:password`; `username`/`password` spelled out are accepted
 * too. Unknown fields of an entry are refused: a typo must not silently mean "no credentials".
 */
const AuthEntrySchema = z
  .object({
    auth: z.string().optional(),
    username: z.string().optional(),
    password: z.string().optional(),
    identitytoken: z.string().optional(),
    email: z.string().optional(),
  })
  .strict();

/**
 * The file as a whole. Its other top-level fields (`HttpHeaders`, `psFormat`, …) belong to the
 * Docker CLI and are ignored; `credsStore` and `credHelpers` name helper programs this service
 * does not run, so a file relying on them is refused instead of pulling without credentials.
 */
const DockerConfigSchema = z.object({
  auths: z.record(z.string(), AuthEntrySchema).default({}),
  credsStore: z
    .undefined({
      error: 'credsStore (a credential helper) is not supported: put `auths` entries in the file',
    })
    .optional(),
  credHelpers: z
    .undefined({
      error: 'credHelpers (credential helpers) are not supported: put `auths` entries in the file',
    })
    .optional(),
});

/** What the engine's pull takes as `X-Registry-Auth` (dockerode's `authconfig`). */
export interface RegistryAuth {
  username?: string;
  password?: string;
  identitytoken?: string;
  serveraddress: string;
}

/**
 * The registry host of an image reference, as the reference grammar decides: the part before the
 * first `/` when it has a `.` or a `:` or is `localhost`. Undefined for the engine's default
 * registry (`debian:bookworm`, `library/x`): this service keeps no credentials for that one.
 */
export function registryHostOf(image: string): string | undefined {
  const slash = image.indexOf('/');
  if (slash < 0) return undefined;
  const first = image.slice(0, slash);
  return first.includes('.') || first.includes(':') || first === 'localhost' ? first : undefined;
}

/** `https://host:port/v1/` and `host:port` name the same registry in a config file's keys. */
function keyHost(key: string): string {
  return key.replace(/^[a-z]+:\/\//i, '').replace(/\/.*$/, '');
}

/**
 * The credentials for `image`'s registry from the Docker configuration file at `file`, read on
 * every pull so a rotated secret (a re-mounted Kubernetes Secret, an edited compose secret) is
 * used without a restart. Undefined when no file is configured, the image names no registry host
 * or the file has no entry for it: the pull then goes without credentials, and a registry that
 * wants some says so (image-pull.ts turns that into a clear error). A file that cannot be read or
 * parsed throws, naming the file and the field.
 */
export async function registryAuthFor(
  image: string,
  file: string | undefined,
): Promise<RegistryAuth | undefined> {
  if (!file) return undefined;
  const host = registryHostOf(image);
  if (!host) return undefined;
  let raw: string;
  try {
    raw = await readFile(file, 'utf8');
  } catch (err) {
    throw new Error(`registry credentials file ${file} cannot be read: ${(err as Error).message}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch (err) {
    throw new Error(`registry credentials file ${file} is not JSON: ${(err as Error).message}`);
  }
  const parsed = DockerConfigSchema.safeParse(json);
  if (!parsed.success) {
    throw new Error(`registry credentials file ${file}: ${formatIssues(parsed.error, 'config')}`);
  }
  const entry = Object.entries(parsed.data.auths).find(([key]) => keyHost(key) === host)?.[1];
  if (!entry) return undefined;
  if (entry.identitytoken) return { identitytoken: entry.identitytoken, serveraddress: host };
  if (entry.auth) {
    const decoded = Buffer.from(entry.auth, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) {
      throw new Error(
        `registry credentials file ${file}: auths["${host}"].auth is not base64 of user:password`,
      );
    }
    return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1), serveraddress: host };
  }
  if (entry.username !== undefined && entry.password !== undefined) {
    return { username: entry.username, password: entry.password, serveraddress: host };
  }
  throw new Error(
    `registry credentials file ${file}: auths["${host}"] needs auth, username and password, or identitytoken`,
  );
}
