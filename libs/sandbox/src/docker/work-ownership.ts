import { posix } from 'node:path';
import type Dockerode from 'dockerode';
import { pack } from 'tar-stream';

/**
 * Hands the work directory (a volume, fresh and root-owned, or a persistent one) to the sandbox's
 * uid:gid before the container starts, so a non-root agent can write its work tree. The images are
 * not ours to change and may have no `chown`, so the engine does it: it extracts a one-entry tar
 * (the directory itself, with the wanted owner) over the mount point of the created container,
 * and tar extraction applies an entry's owner to an existing directory.
 */
export async function giveWorkDirectoryTo(
  container: Dockerode.Container,
  workingDirectory: string,
  user: string,
): Promise<void> {
  const dir = posix.normalize(workingDirectory);
  if (dir === '/') throw new Error('workingDirectory "/" cannot be handed to a non-root user');
  const [uid, gid = uid] = user.split(':').map(Number) as [number, number?];
  const archive = pack();
  archive.entry({ name: `${posix.basename(dir)}/`, type: 'directory', mode: 0o750, uid, gid });
  archive.finalize();
  const chunks: Buffer[] = [];
  for await (const chunk of archive) chunks.push(chunk as Buffer);
  await container.putArchive(Buffer.concat(chunks), { path: posix.dirname(dir) });
}

/**
 * giveWorkDirectoryTo for a sandbox with a read-only root: the engine refuses an archive whose
 * target directory is on a read-only root (here the mount point's parent), so the hand-over goes
 * through a never-started container of the same image with the same volume and a writable root.
 */
export async function giveWorkVolumeTo(
  docker: Dockerode,
  input: {
    image: string;
    volume: string;
    workingDirectory: string;
    user: string;
    labels: Record<string, string>;
  },
): Promise<void> {
  const scratch = await docker.createContainer({
    Image: input.image,
    Entrypoint: ['/nonexistent'],
    Labels: input.labels,
    HostConfig: {
      Mounts: [{ Type: 'volume', Source: input.volume, Target: input.workingDirectory }],
      NetworkMode: 'none',
    },
  });
  try {
    await giveWorkDirectoryTo(scratch, input.workingDirectory, input.user);
  } finally {
    await scratch.remove({ force: true, v: false });
  }
}
