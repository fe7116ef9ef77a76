import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunStep } from '@sandstream/wire';

/**
 * A run step's stdin as a file the process opens as its fd 0: written (0600, in a fresh private
 * directory) before the launch and removed as soon as the process has it open, so input of any
 * size reaches it without the agent writing to a pipe the process may never read. Falls back to
 * a hidden directory in the workspace when the image has no writable temp directory (a libc-less
 * image may have no /tmp at all).
 */
export class StdinFile {
  private constructor(
    readonly path: string,
    private readonly dir: string,
  ) {}

  static async create(step: RunStep, workspace: string): Promise<StdinFile | undefined> {
    if (step.stdin === undefined) return undefined;
    const content = Buffer.from(step.stdin, step.stdinEncoding === 'base64' ? 'base64' : 'utf8');
    const dir = await privateStdinDir(workspace);
    const path = join(dir, 'stdin');
    await writeFile(path, content, { mode: 0o600 });
    return new StdinFile(path, dir);
  }

  /** Idempotent; never throws (a leftover file is not worth failing the step for). */
  async remove(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true }).catch(() => {});
  }
}

/**
 * A fresh private directory for a command's stdin (a file or a FIFO): in the temp directory, or
 * hidden in the workspace when the image has no writable one.
 */
export async function privateStdinDir(workspace: string): Promise<string> {
  try {
    return await mkdtemp(join(tmpdir(), 'sandstream-stdin-'));
  } catch {
    return await mkdtemp(join(workspace, '.sandstream-stdin-'));
  }
}
