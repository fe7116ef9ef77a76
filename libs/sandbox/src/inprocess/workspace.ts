import { mkdir, mkdtemp, rm, symlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';

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

/**
 * The in-process stand-in for mounts: each volume is a directory under `volumesRoot`, linked in
 * at its mount path inside the workspace (which stands for the sandbox's `/` to a confined agent,
 * so `/data` is `<workspace>/data`). A child process has no mount namespace: `readOnly` is not
 * enforced here, and commands reach the volume by the relative path (docs/volumes.md). Returns
 * the volumes' directories, which the confined agent may follow links to.
 */
export async function linkVolumes(
  volumesRoot: string,
  workspace: string,
  volumes: readonly { source: string; mountPath: string }[],
): Promise<string[]> {
  const dirs: string[] = [];
  for (const v of volumes) {
    const dir = join(volumesRoot, v.source);
    await mkdir(dir, { recursive: true });
    const link = join(workspace, `.${v.mountPath.replace(/\/+$/, '')}`);
    await mkdir(dirname(link), { recursive: true });
    // A persistent workspace keeps an earlier sandbox's link: replaced, never followed.
    await rm(link, { force: true });
    await symlink(dir, link, 'dir');
    dirs.push(dir);
  }
  return dirs;
}
