import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Docker from 'dockerode';
import { repoRoot } from './processes.js';

export interface DockerEngine {
  docker: Docker;
  /** Why the caller must skip (no engine, not CI), or false to run. */
  skip: string | false;
}

/**
 * Whether a Docker engine answers, for suites that need one. Outside CI a missing engine skips
 * them with a loud message (a laptop without Docker can still run the rest); with CI=true they
 * run anyway and fail, because CI must never pass by skipping.
 */
export async function dockerEngine(suite = 'Docker tests'): Promise<DockerEngine> {
  const docker = new Docker();
  try {
    await docker.ping();
    return { docker, skip: false };
  } catch (err) {
    if (process.env.CI === 'true') return { docker, skip: false };
    const skip = `no Docker engine answers (${(err as Error).message}); start one with scripts/ensure-docker.sh`;
    process.stderr.write(`\n*** SKIPPING ${suite}: ${skip} ***\n\n`);
    return { docker, skip };
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
 * this checkout's own (tagged by content, recorded in agent/dist/carrier-image by
 * scripts/images/agent-carrier.sh) when the engine has it, else a locally built
 * `sandstream/agent-carrier` (tag `dev` preferred), else undefined.
 */
export function findCarrierImage(): string | undefined {
  if (process.env.SANDSTREAM_CARRIER_IMAGE) return process.env.SANDSTREAM_CARRIER_IMAGE;
  try {
    const own = readFileSync(join(repoRoot, 'agent/dist/carrier-image'), 'utf8').trim();
    execFileSync('docker', ['image', 'inspect', own], { stdio: 'ignore' });
    return own;
  } catch {
    // No record, or the engine lost that image: any local carrier below.
  }
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
