// Makes a fresh clone runnable: installs the Debian packages the next steps need (as root; else it
// prints the apt-get line), the npm dependencies when they are missing or older than the lock file,
// builds every workspace (turbo caches what did not change), and, when this machine can run a
// Docker engine, starts it and builds the local images the Docker backend and tests use.
// Shared by `npm start` and `npm test` so that both quick-start commands work on a fresh machine.
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensurePackages } from './system-packages.mjs';

export const root = join(dirname(fileURLToPath(import.meta.url)), '..');

function run(command, args, { optional = false } = {}) {
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit', env: process.env });
  if (result.status === 0) return true;
  if (optional) return false;
  console.error(
    `bootstrap: \`${command} ${args.join(' ')}\` failed (exit ${result.status ?? result.signal})`,
  );
  process.exit(result.status ?? 1);
}

function dependenciesCurrent() {
  const marker = join(root, 'node_modules', '.package-lock.json');
  return existsSync(marker) && statSync(marker).mtimeMs >= statSync(join(root, 'package-lock.json')).mtimeMs;
}

/**
 * @param {{ docker?: 'required' | 'optional' | 'skip', packages?: string[] }} options
 *   docker — required: fail when no Docker engine can be had (CI); optional: carry on without one
 *   (the in-process backend and the non-Docker tests still work); skip: do not touch Docker.
 *   packages — further Debian packages the caller needs (system-packages.mjs names them).
 */
export function bootstrap({ docker = 'optional', packages = [] } = {}) {
  ensurePackages(['gcc', 'g++', 'libc6-dev', ...packages], { purpose: 'the build' });
  if (!dependenciesCurrent()) run('bash', ['scripts/install-deps.sh']);
  run('npm', ['run', 'build', '--silent']);
  if (docker === 'skip') return { docker: false };
  const required = docker === 'required';
  const purpose = 'the Docker backend and its local images';
  const installed = ensurePackages(['docker.io', 'debootstrap', 'busybox-static'], { required, purpose });
  // gVisor's runsc goes in before the engine script, which registers it in the engine's runtimes.
  // Outside CI a machine without it still runs every other sandbox; its gVisor tests skip.
  if (installed) ensurePackages(['runsc'], { required, purpose: 'gVisor sandboxes (runtimeClass: gvisor)' });
  const engine = installed && run('bash', ['scripts/ensure-docker.sh'], { optional: !required });
  if (!engine) return { docker: false };
  run('bash', ['scripts/images/build-all.sh']);
  return { docker: true };
}
