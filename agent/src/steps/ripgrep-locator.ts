import { execFile } from 'node:child_process';
import { constants } from 'node:fs';
import { access } from 'node:fs/promises';
import path from 'node:path';

/** ripgrep 11 is the oldest release with every flag the ripgrep engine passes (--json, --sort, --crlf). */
const MIN_MAJOR = 11;

let cached: Promise<string | null> | null = null;

/**
 * The ripgrep binary to use, or null when there is none (or too old). Looked up once per
 * process: the image does not change under a running agent.
 */
export function findRipgrep(): Promise<string | null> {
  cached ??= locate(process.env.PATH ?? '');
  return cached;
}

export async function locate(searchPath: string): Promise<string | null> {
  for (const dir of searchPath.split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, 'rg');
    try {
      await access(candidate, constants.X_OK);
    } catch {
      continue;
    }
    return (await version(candidate)) >= MIN_MAJOR ? candidate : null;
  }
  return null;
}

function version(binary: string): Promise<number> {
  return new Promise((resolve) => {
    execFile(binary, ['--version'], { timeout: 5000 }, (err, stdout) => {
      const major = /ripgrep (\d+)\./.exec(stdout)?.[1];
      resolve(err || major === undefined ? -1 : Number(major));
    });
  });
}
