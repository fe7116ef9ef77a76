import { access, constants } from 'node:fs/promises';

/** The shells a sandbox's shell sessions and terminals try, best first: bash when the image has it, else POSIX sh. */
export const SHELLS = ['/bin/bash', '/bin/sh'] as const;

/** The first of SHELLS this image can run, or undefined (a distroless image). */
export async function findShell(): Promise<string | undefined> {
  for (const path of SHELLS) {
    try {
      await access(path, constants.X_OK);
      return path;
    } catch {
      // not this one
    }
  }
  return undefined;
}

/** The refusal for an image without any of SHELLS, naming what is missing and what to do instead. */
export function noShellMessage(what: string): string {
  return `this image has no shell (${SHELLS.join(' or ')}): ${what} need one; run commands with exec instead`;
}
