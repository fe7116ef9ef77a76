import { spawn } from 'node:child_process';

let found: Promise<string | null> | undefined;

/**
 * GNU tar on PATH, or null. Only GNU tar: it refuses members named with `..`, strips a leading
 * `/`, and creates an archive's symlinks last, so no member is written through one (checked
 * with such an archive in gnu-tar.test.ts); BusyBox's tar and bsdtar are not trusted with that.
 * Looked up once per process.
 */
export function findGnuTar(): Promise<string | null> {
  found ??= new Promise((resolve) => {
    const probe = spawn('tar', ['--version'], { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    probe.stdout.on('data', (data: Buffer) => {
      out += data.toString();
    });
    probe.on('error', () => resolve(null));
    probe.on('close', (code) => resolve(code === 0 && /GNU tar/.test(out) ? 'tar' : null));
  });
  return found;
}

/** The end of tar's stderr kept for the error message: its first complaints say what went wrong. */
const STDERR_KEPT = 4096;

/**
 * Unpacks a tar stream into `dest` with GNU tar: the agent hands it the chunks and counts the
 * regular files it reports (`-vv` lines starting with `-`). Several times less CPU than unpacking
 * in JavaScript, which on a Docker sandbox runs inside its CPU limit. A failing source (a
 * transfer over its limit, the sender gone) kills tar and rethrows; tar failing (a bad member)
 * throws its own words.
 */
export async function extractWithGnuTar(
  tar: string,
  chunks: AsyncIterable<Buffer>,
  dest: string,
): Promise<{ files: number }> {
  const child = spawn(tar, ['-x', '-f', '-', '-C', dest, '--no-same-owner', '-vv'], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let files = 0;
  let partial = '';
  child.stdout.on('data', (data: Buffer) => {
    const lines = (partial + data.toString('latin1')).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) if (line.startsWith('-')) files += 1;
  });
  let stderr = '';
  child.stderr.on('data', (data: Buffer) => {
    if (stderr.length < STDERR_KEPT) stderr += data.toString();
  });
  const exited = new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve(code));
  });
  // tar may stop reading early (it failed): writes then fail with EPIPE, which the exit reports.
  child.stdin.on('error', () => {});
  try {
    for await (const chunk of chunks) {
      if (!child.stdin.write(chunk)) {
        await new Promise<void>((resolve) => {
          const done = () => {
            child.stdin.off('drain', done);
            child.off('close', done);
            resolve();
          };
          child.stdin.on('drain', done);
          child.on('close', done);
        });
      }
      if (child.exitCode !== null) break;
    }
    child.stdin.end();
  } catch (err) {
    child.kill('SIGKILL');
    await exited.catch(() => {});
    throw err;
  }
  const code = await exited;
  if (partial.startsWith('-')) files += 1;
  if (code !== 0) {
    const said = stderr
      .split('\n')
      .filter((line) => line.trim() !== '' && !/Exiting with failure status/.test(line))
      .slice(0, 3)
      .join('; ');
    throw new Error(said || `tar exited with code ${code}`);
  }
  return { files };
}
