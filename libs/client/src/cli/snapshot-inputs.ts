import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';

/**
 * What the CLI's start-up snapshot was built from, to tell at each start whether the compiled
 * CLI changed since: the `dist/.tsbuildinfo` of every package of ours the bundle holds (paths
 * relative to the client package). tsc rewrites a package's build info whenever it emits
 * anything there, and leaves it as it is otherwise, so equal contents mean the same compiled
 * modules. Contents, not times: a turbo cache restore (or a copy) writes every file anew, in any
 * order, and a comparison of modification times then called a fresh snapshot stale (issue 33).
 */
export const SNAPSHOT_INPUTS_ENV = 'SANDSTREAM_CLI_SNAPSHOT_INPUTS';

/** One digest of the files' contents, in order; undefined when one cannot be read. */
export function digestOfInputs(packageDir: string, files: readonly string[]): string | undefined {
  const hash = createHash('sha1');
  try {
    for (const file of files) {
      hash.update(file);
      hash.update(readFileSync(resolve(packageDir, file)));
    }
  } catch {
    return undefined;
  }
  return hash.digest('hex');
}

/** The files named by the snapshot build (scripts/build-cli.mjs), from its environment. */
export function inputsFromEnv(env: NodeJS.ProcessEnv): string[] {
  const raw = env[SNAPSHOT_INPUTS_ENV];
  if (!raw)
    throw new Error(`${SNAPSHOT_INPUTS_ENV} is not set: build the snapshot with scripts/build-cli.mjs`);
  const files: unknown = JSON.parse(raw);
  if (!Array.isArray(files) || !files.every((f) => typeof f === 'string'))
    throw new Error(`${SNAPSHOT_INPUTS_ENV} must be a JSON array of paths (got ${raw})`);
  return files;
}
