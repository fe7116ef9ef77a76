import { execFileSync } from 'node:child_process';
import Docker from 'dockerode';

/**
 * Whether a Docker engine answers. Suites that need one call `dockerOrSkip` at collection time:
 * outside CI a missing engine skips them with a loud message (a laptop without Docker can still run
 * the rest); with CI=true it is an error, because CI must never pass by skipping.
 */
export async function dockerAvailable(docker: Docker = new Docker()): Promise<boolean> {
  try {
    await docker.ping();
    return true;
  } catch {
    return false;
  }
}

export interface DockerGate {
  docker: Docker;
  /** True when the suite must be skipped (no engine, not CI). */
  skip: boolean;
}

export async function dockerOrSkip(suite: string): Promise<DockerGate> {
  const docker = new Docker();
  if (await dockerAvailable(docker)) return { docker, skip: false };
  const message = `${suite}: no Docker engine answers (start one with scripts/ensure-docker.sh)`;
  if (process.env.CI === 'true') throw new Error(`${message}; CI=true, so this is a failure, not a skip`);
  process.stderr.write(`\n*** SKIPPING ${message} ***\n\n`);
  return { docker, skip: true };
}

export async function imageExists(docker: Docker, image: string): Promise<boolean> {
  try {
    await docker.getImage(image).inspect();
    return true;
  } catch {
    return false;
  }
}

/** Collects a finished container's stdout and stderr as text (non-TTY containers multiplex them). */
export async function containerLogs(container: Docker.Container): Promise<string> {
  const raw = await container.logs({ stdout: true, stderr: true, follow: false });
  const buf = Buffer.isBuffer(raw) ? raw : Buffer.from(raw as unknown as string);
  // Demultiplex the 8-byte frame headers: [stream, 0, 0, 0, size(4, big endian)].
  const parts: string[] = [];
  let offset = 0;
  while (offset + 8 <= buf.length) {
    const size = buf.readUInt32BE(offset + 4);
    parts.push(buf.subarray(offset + 8, offset + 8 + size).toString('utf8'));
    offset += 8 + size;
  }
  return parts.join('');
}

/**
 * The agent carrier image the Docker backend should use in tests: $SANDSTREAM_CARRIER_IMAGE, else
 * the locally built `sandstream/agent-carrier` (tag `dev` preferred), else undefined.
 */
export function findCarrierImage(): string | undefined {
  if (process.env.SANDSTREAM_CARRIER_IMAGE) return process.env.SANDSTREAM_CARRIER_IMAGE;
  try {
    const tags = execFileSync('docker', ['images', 'sandstream/agent-carrier', '--format', '{{.Tag}}'], {
      encoding: 'utf8',
    })
      .trim()
      .split('\n')
      .filter(Boolean);
    const tag = tags.includes('dev') ? 'dev' : tags[0];
    return tag ? `sandstream/agent-carrier:${tag}` : undefined;
  } catch {
    return undefined;
  }
}
