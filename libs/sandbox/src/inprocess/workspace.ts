import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';

export interface JobDirectories {
  /** Removed on destroy: holds the agent log and, for a temporary workspace, the workspace. */
  stateDir: string;
  /** The agent's --workdir. */
  workspace: string;
  persistent: boolean;
}

/**
 * A fresh state directory per job under `root`; the workspace is either `<stateDir>/work` or,
 * for a persistent workspace, `<persistentRoot>/<name>`, which destroy leaves in place so the
 * next job naming it finds its files.
 */
export async function createJobDirectories(options: {
  root: string;
  persistentRoot: string;
  jobId: string;
  persistentName?: string;
}): Promise<JobDirectories> {
  const jobsDir = join(options.root, 'jobs');
  await mkdir(jobsDir, { recursive: true, mode: 0o700 });
  // Job ids are restricted to [A-Za-z0-9._:-] by the wire schema, so they are safe in a file name.
  const stateDir = await mkdtemp(join(jobsDir, `${options.jobId}-`));
  if (options.persistentName) {
    const workspace = join(options.persistentRoot, options.persistentName);
    await mkdir(workspace, { recursive: true });
    return { stateDir, workspace, persistent: true };
  }
  const workspace = join(stateDir, 'work');
  await mkdir(workspace);
  return { stateDir, workspace, persistent: false };
}

export async function removeJobDirectories(dirs: { stateDir: string }): Promise<void> {
  await rm(dirs.stateDir, { recursive: true, force: true });
}
