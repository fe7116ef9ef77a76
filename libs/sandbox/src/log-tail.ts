import { open } from 'node:fs/promises';

/**
 * The last `maxLines` lines of a log file, reading at most `maxBytes` from its end so that a
 * runaway log cannot make an error message (or this process) huge. Missing file -> [].
 */
export async function readLogTail(path: string, maxLines = 20, maxBytes = 64 * 1024): Promise<string[]> {
  let handle: Awaited<ReturnType<typeof open>> | undefined;
  try {
    handle = await open(path, 'r');
    const { size } = await handle.stat();
    const length = Math.min(size, maxBytes);
    const buffer = Buffer.alloc(length);
    await handle.read(buffer, 0, length, size - length);
    return lastLines(buffer.toString('utf8'), maxLines);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  } finally {
    await handle?.close();
  }
}

export function lastLines(text: string, maxLines: number): string[] {
  const lines = text.split(/\r?\n/);
  while (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  return lines.slice(-maxLines);
}

/** "exited with code 3; last output:\n  a\n  b" — the shape both backends use in agent_crashed errors. */
export function describeCrash(what: string, exitCode: number | null, lines: readonly string[]): string {
  const code = exitCode === null ? 'an unknown exit code' : `exit code ${exitCode}`;
  const tail =
    lines.length > 0 ? `; last output:\n${lines.map((l) => `  ${l}`).join('\n')}` : '; it printed nothing';
  return `${what} exited with ${code} before the agent became ready${tail}`;
}
