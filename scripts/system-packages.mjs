// The Debian packages the quick-start commands need, and the one place that installs them.
// `npm start` and `npm test` call ensurePackages() with what their next step needs, so a fresh
// machine (Node and npm only) gets exactly those packages: as root through apt-get, otherwise
// with the exact `apt-get install` line to run and why each package is needed.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

/**
 * What each package is for, and how to tell it is installed. `command` is looked up on PATH and
 * in /usr/sbin (nats-server and dockerd live there); `dpkg` asks dpkg when a command alone cannot
 * tell (a dynamic busybox also answers `busybox`; libc6-dev has no command).
 */
export const PACKAGES = {
  gcc: { command: 'gcc', why: "builds the agent's static spawner helper" },
  'g++': { command: 'g++', why: "builds the agent's source-release addon (V8's C++ API)" },
  'libc6-dev': { dpkg: true, why: 'libc.a, to link the spawner helper statically' },
  'redis-server': {
    command: 'redis-server',
    why: 'the embedded Redis of `npm start`, and tests that restart Redis',
  },
  'redis-tools': {
    command: 'redis-cli',
    why: 'tests drive Redis through redis-cli (seed 000 smoke test, Redis Cluster)',
  },
  'nats-server': {
    command: 'nats-server',
    why: 'the embedded NATS (JetStream log archive) of `npm start`, and tests of the relay and archive',
  },
  ripgrep: { command: 'rg', why: 'the grep step uses ripgrep when present; tests cover both paths' },
  tmux: {
    command: 'tmux',
    why: 'tests drive `sandstream shell` on a real terminal (send-keys, capture-pane)',
  },
  chromium: {
    command: 'chromium',
    why: "the web console's browser test drives it headless through playwright-core",
  },
  'docker.io': { command: 'dockerd', why: 'the Docker sandbox backend' },
  iptables: {
    command: 'iptables',
    why: "the egress rules of Docker sandboxes (each sandbox's network policy)",
  },
  runsc: { command: 'runsc', why: 'gVisor, the Docker runtime behind `runtimeClass: gvisor`' },
  'kubernetes-client': {
    command: 'kubectl',
    why: 'tests render the deploy/k8s overlays with `kubectl kustomize`',
  },
  'docker-compose': {
    command: 'docker-compose',
    why: 'the compose stack test brings docker-compose.yml up',
  },
  prometheus: {
    command: 'prometheus',
    why: 'a test scrapes every service of a running stack with a real Prometheus',
  },
  'docker-registry': {
    command: 'docker-registry',
    why: 'image-pull tests push to and pull from a registry the test starts (no outside registry is reachable)',
  },
  'apache2-utils': {
    command: 'htpasswd',
    why: "htpasswd writes the bcrypt password file of the pull tests' registry with basic auth",
  },
  debootstrap: { command: 'debootstrap', why: 'builds the local Debian image (no registry can be reached)' },
  'busybox-static': { dpkg: true, why: 'builds the libc-less busybox test image' },
};

function onPath(command) {
  if (existsSync(`/usr/sbin/${command}`) || existsSync(`/usr/bin/${command}`)) return true;
  return spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;
}

function dpkgInstalled(name) {
  // biome-ignore lint/suspicious/noTemplateCurlyInString: dpkg-query's own format syntax
  const result = spawnSync('dpkg-query', ['-W', '-f=${Status}', name], { encoding: 'utf8' });
  return result.status === 0 && result.stdout.includes('install ok installed');
}

export function isInstalled(name) {
  const pkg = PACKAGES[name];
  if (!pkg) throw new Error(`system-packages: unknown package ${name}`);
  return pkg.dpkg ? dpkgInstalled(name) : onPath(pkg.command);
}

export function missingPackages(names) {
  return names.filter((name) => !isInstalled(name));
}

const isRoot = () => typeof process.getuid === 'function' && process.getuid() === 0;
let aptUpdated = false;

function apt(args) {
  const result = spawnSync('apt-get', args, {
    stdio: ['ignore', 'ignore', 'inherit'],
    // needrestart (Ubuntu's apt hook) would ask which services to restart, or print Perl
    // warnings without a terminal: suspended here, and automatic were it to run.
    env: {
      ...process.env,
      DEBIAN_FRONTEND: 'noninteractive',
      NEEDRESTART_SUSPEND: '1',
      NEEDRESTART_MODE: 'a',
    },
  });
  return result.status === 0;
}

/**
 * Makes sure `names` are installed. Returns true when they all are (afterwards). When they are
 * not and cannot be installed here (not root), prints the apt-get line and why, and returns
 * false; with `required`, exits with status 1 instead.
 *
 * @param {string[]} names
 * @param {{ required?: boolean, purpose: string }} options
 */
export function ensurePackages(names, { required = true, purpose }) {
  const missing = missingPackages(names);
  if (missing.length === 0) return true;
  const line = `apt-get install -y ${missing.join(' ')}`;
  const reasons = missing.map((name) => `  ${name}: ${PACKAGES[name].why}`).join('\n');
  if (!isRoot()) {
    const say = required ? console.error : console.warn;
    say(`${purpose} needs Debian packages that are missing; as root, run:\n  ${line}\n${reasons}`);
    if (required) process.exit(1);
    return false;
  }
  console.log(`installing ${missing.join(', ')} (${purpose})`);
  if (!aptUpdated) aptUpdated = apt(['update', '-qq']);
  if (!apt(['install', '-y', '-qq', ...missing]) || missingPackages(missing).length > 0) {
    const say = required ? console.error : console.warn;
    say(`\`${line}\` failed; ${purpose} cannot go on without:\n${reasons}`);
    if (required) process.exit(1);
    return false;
  }
  return true;
}
