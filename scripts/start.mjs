#!/usr/bin/env node
// `npm start`: the whole system on this machine. Starts the five services (the HTTP API last) as separate processes
// against its own embedded Redis (scripts/local-redis.mjs; REDIS_URL names another instead) and
// its own embedded NATS with JetStream for the log archive (scripts/local-nats.mjs; NATS_URL
// names another, LOG_ARCHIVE=off runs without) with the auto-detected sandbox backend, waits
// until each is ready, submits examples/hello.yaml and streams its output, then keeps running
// until Ctrl-C, which stops every child cleanly (SIGTERM, then SIGKILL after a grace period),
// destroys every sandbox of the run (pod-lifecycle's teardown-main.js), and stops the embedded
// NATS and Redis last.
//
//   npm start -- --scale step-dispatcher=3 --scale scheduler=2   several processes of a service
//   npm start -- --scale api=2                                   more API replicas, each on a free port
//   npm start -- --job examples/other.yaml                       submit another job file
//   npm start -- --no-job                                        services only
//   npm start -- --logs                                          service logs on the terminal
//                                                                (else under .cache/start-logs/)
import { execFileSync, spawn } from 'node:child_process';
import { createWriteStream, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { bootstrap } from './bootstrap.mjs';
import { startLocalNats } from './local-nats.mjs';
import { startLocalRedis } from './local-redis.mjs';
import { freePort as anyFreePort, bindable } from './ports.mjs';
import { ensurePackages, isInstalled } from './system-packages.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const SERVICES = ['scheduler', 'pod-lifecycle', 'step-dispatcher', 'reaper', 'api'];
const ALIASES = { dispatcher: 'step-dispatcher', lifecycle: 'pod-lifecycle' };

const { values } = parseArgs({
  options: {
    scale: { type: 'string', multiple: true, default: [] },
    job: { type: 'string', default: 'examples/hello.yaml' },
    'no-job': { type: 'boolean', default: false },
    logs: { type: 'boolean', default: false },
    namespace: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (values.help) {
  process.stdout.write(
    'npm start -- [--scale <service>=<n>]... [--job <file> | --no-job] [--logs] [--namespace <ns>]\n' +
      '(the -- matters: `npm start --no-job` is taken by npm as its own option)\n',
  );
  process.exit(0);
}

const scale = Object.fromEntries(SERVICES.map((s) => [s, 1]));
for (const entry of values.scale) {
  const match = /^([a-z-]+)=(\d+)$/.exec(entry);
  const name = match ? (ALIASES[match[1]] ?? match[1]) : undefined;
  if (!match || !SERVICES.includes(name) || Number(match[2]) < 1 || Number(match[2]) > 16) {
    console.error(`--scale ${entry}: expected <service>=<1..16> with service one of ${SERVICES.join(', ')}`);
    process.exit(2);
  }
  scale[name] = Number(match[2]);
}

// Passed through to the children as they are; not a build input.
const { env } = process;
const namespace = values.namespace ?? env.SANDSTREAM_NAMESPACE ?? 'sandstream';

// `npm start --no-job` / `npm start --job x.yaml` without the `--`: npm keeps the flag as its own
// config and hands it over only as npm_config_job ('' for --no-job). Honoured, with the form
// that reaches this script.
const npmJob = env.npm_config_job;
if (
  npmJob !== undefined &&
  npmJob !== 'true' &&
  !process.argv.slice(2).some((a) => /^--(no-)?job\b/.test(a))
) {
  if (npmJob === '' || npmJob === 'false') values['no-job'] = true;
  else values.job = npmJob;
  console.log(
    `npm took ${npmJob === '' || npmJob === 'false' ? '--no-job' : `--job ${npmJob}`} as its own option; ` +
      'honoured, but write it after --: npm start -- --no-job',
  );
}

/** Why the backend was chosen, when this script chose it (else detectBackend's own reason). */
let backendWhy;

// A fresh clone just works: dependencies, build, and — where a Docker engine can run — dockerd and
// the local images. SANDSTREAM_SKIP_BOOTSTRAP=1 skips this (tests that already built everything).
if (env.SANDSTREAM_SKIP_BOOTSTRAP !== '1') {
  const { docker } = bootstrap({
    docker: env.SANDBOX_TYPE === 'docker' ? 'required' : 'optional',
    packages: env.REDIS_URL ? [] : ['redis-server'],
  });
  if (!docker && !env.SANDBOX_TYPE) {
    // Without an engine a leftover socket would still make detection pick Docker.
    process.env.SANDBOX_TYPE = 'inprocess';
    backendWhy =
      'no Docker engine runs or can be started here; sandboxes run as local child processes without isolation';
  }
}
{
  // The services detect the backend the same way (libs/sandbox detect-backend.ts); said here, on
  // the terminal, and not only in pod-lifecycle's log. Built by bootstrap above, hence loaded now.
  const { detectBackend } = await import('../libs/sandbox/dist/detect-backend.js');
  const detection = detectBackend({ env: process.env });
  console.log(
    `sandbox backend: ${detection.kind} (${backendWhy ?? detection.reason}; SANDBOX_TYPE=docker|inprocess|kubernetes chooses)`,
  );
}

// A port bound and released can come back from the next bind(0) before its child listens on
// it: never hand out the same port twice (two processes answering one /readyz hid a crash).
const handedOut = new Set();
async function freePort() {
  for (;;) {
    const port = await anyFreePort();
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
}

// SANDSTREAM_METRICS_PORT names the first metrics port; with several processes each gets the next
// free one (one port shared by all would stop every process after the first).
const metricsBase = env.SANDSTREAM_METRICS_PORT ? Number(env.SANDSTREAM_METRICS_PORT) : undefined;
let nextMetricsPort = metricsBase;
async function takeMetricsPort() {
  if (nextMetricsPort === undefined) return undefined;
  for (let port = nextMetricsPort; port <= 65535; port++) {
    if ((await bindable(port)) !== null) {
      nextMetricsPort = port + 1;
      return port;
    }
  }
  throw new Error(`no free metrics port at or above ${metricsBase}`);
}

const children = [];
let starting = true;
let stopping = false;
// No REDIS_URL: our own Redis, with AOF and no open `default` user, that the CLI finds by itself.
let localRedis;
let redisUrl = env.REDIS_URL;
// No NATS_URL: our own nats-server with JetStream, so the log archive is on as in production.
let localNats;
let natsUrl = env.NATS_URL;
// SANDSTREAM_CACHE_DIR: where the embedded Redis and NATS keep their data and local.json (tests).
const cacheDir = env.SANDSTREAM_CACHE_DIR ?? join(root, '.cache');
const logDir = join(cacheDir, 'start-logs');
mkdirSync(logDir, { recursive: true });

/** The environment of every process of this run (services, teardown, CLI): its Redis, NATS and namespace. */
function runEnv(extra = {}) {
  return {
    ...process.env,
    REDIS_URL: redisUrl,
    ...(natsUrl ? { NATS_URL: natsUrl } : {}),
    SANDSTREAM_NAMESPACE: namespace,
    ...extra,
  };
}

// Docker sandboxes join this bridge (DEFAULT_SANDBOX_NETWORK in libs/sandbox docker-network.ts,
// same options) and are sent to its gateway for Redis, so the embedded Redis must listen there as
// well as on loopback. Made here, before Redis starts, since the gateway is only known once the
// network exists. Undefined when Docker will not run sandboxes or cannot be asked.
function dockerSandboxes() {
  return env.SANDBOX_TYPE !== 'inprocess' && env.SANDBOX_TYPE !== 'kubernetes';
}

function sandboxBridgeGateway() {
  if (!dockerSandboxes()) return undefined;
  if (env.SANDSTREAM_DOCKER_NETWORK) return undefined; // the operator's network, the operator's Redis binding
  const name = 'sandstream-sandboxes';
  const gateway = () =>
    execFileSync('docker', ['network', 'inspect', '-f', '{{range .IPAM.Config}}{{.Gateway}} {{end}}', name], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    })
      .trim()
      .split(/\s+/)
      .find((g) => g && !g.includes(':'));
  try {
    return gateway();
  } catch {
    try {
      execFileSync(
        'docker',
        [
          'network',
          'create',
          '--driver',
          'bridge',
          '--opt',
          'com.docker.network.bridge.enable_icc=false',
        ].concat([
          '--opt',
          'com.docker.network.bridge.name=sandstream0',
          '--label',
          'app.kubernetes.io/managed-by=sandstream',
          name,
        ]),
        { stdio: 'ignore' },
      );
      return gateway();
    } catch {
      return undefined;
    }
  }
}

/**
 * The HTTP API's port: API_PORT (default 8080) for the first replica, a free one for each further
 * replica, and for the first once it could not listen on API_PORT (`clashed`). Anonymous requests from loopback act as tenant `default` here (API_ANONYMOUS, off in
 * the deployed manifests), so seed 003's curl lines work as printed.
 */
async function apiEnv(index, clashed) {
  const first = Number(env.API_PORT ?? 8080);
  let port = index === 0 && !clashed ? first : await freePort();
  if (index === 0 && !clashed && (await bindable(first)) === null) {
    port = await freePort();
    console.log(`port ${first} is taken: the API listens on ${port} instead (API_PORT chooses)`);
  }
  handedOut.add(port);
  return { API_PORT: String(port), API_ANONYMOUS: env.API_ANONYMOUS ?? 'loopback' };
}

async function startOne(name, index, clashed = false) {
  const port = await freePort();
  const extra = name === 'api' ? await apiEnv(index, clashed) : {};
  const metricsPort = await takeMetricsPort();
  const label = scale[name] > 1 ? `${name}#${index + 1}` : name;
  const child = spawn(process.execPath, [join(root, 'services', name, 'dist', 'main.js')], {
    cwd: root,
    env: runEnv({
      HEALTH_PORT: String(port),
      ...extra,
      ...(metricsPort === undefined ? {} : { SANDSTREAM_METRICS_PORT: String(metricsPort) }),
    }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // A restart after a port clash appends: the log keeps why the first attempt ended.
  const log = createWriteStream(join(logDir, `${label.replace('#', '-')}.log`), {
    flags: clashed ? 'a' : 'w',
  });
  const entry = { name, index, label, child, port, metricsPort, apiPort: extra.API_PORT, tail: '' };
  for (const stream of [child.stdout, child.stderr]) {
    stream.pipe(log, { end: false });
    stream.on('data', (chunk) => {
      entry.tail = (entry.tail + chunk.toString()).slice(-TAIL_CHARS);
      if (values.logs) process.stderr.write(prefixLines(label, chunk));
    });
  }
  entry.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  entry.exited.then(({ code, signal }) => {
    log.end();
    // Until every service is ready, an exit is told (and acted on) by readyOrRestarted.
    if (!stopping && !starting)
      console.error(`✗ ${label} exited (${signal ?? code}): ${exitReason(entry)}; see ${logDir}/`);
  });
  children.push(entry);
  return entry;
}

// What of a child's output is kept in memory to say why it exited (its log file has it all).
const TAIL_CHARS = 16_384;

/**
 * Why a child exited, in a line: its last error-level log line (pino's JSON lines: `msg` and `err`),
 * else its last line of output. Printed on the terminal so a failed start says its cause there.
 */
function exitReason({ tail }) {
  const lines = tail.split('\n').filter((l) => l.trim() !== '');
  for (const line of lines.toReversed()) {
    try {
      const record = JSON.parse(line);
      // pino's level as a label (the services' format) or as its number.
      if (
        ['error', 'fatal'].includes(record.level) ||
        (typeof record.level === 'number' && record.level >= 50)
      )
        return [record.msg, typeof record.err === 'string' ? record.err : record.err?.message]
          .filter(Boolean)
          .join(': ');
    } catch {
      // not a JSON log line
    }
  }
  return lines.at(-1)?.slice(0, 300) ?? 'no output';
}

function prefixLines(label, chunk) {
  return chunk
    .toString()
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => `[${label}] ${l}\n`)
    .join('');
}

async function waitReady(entry, timeoutMs = 90_000) {
  const { label, port, child } = entry;
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null)
      throw new Error(`${label} exited with ${child.exitCode}: ${exitReason(entry)} (see ${logDir}/)`);
    try {
      if ((await fetch(`http://127.0.0.1:${port}/readyz`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 150));
  }
  throw new Error(`${label} not ready after ${timeoutMs} ms (see ${logDir}/)`);
}

// A port found free is only free until somebody binds it: another program on this machine can
// take it before the child listens. A child that exits at start for that reason is started again
// on other ports, up to this many times; any other failure stops the run.
const PORT_CLASH_RETRIES = 3;

/** Waits until the child is ready, starting it again on other ports if one was taken meanwhile. */
async function readyOrRestarted(entry) {
  for (let attempt = 0; ; attempt++) {
    try {
      await waitReady(entry);
      return;
    } catch (err) {
      if (attempt >= PORT_CLASH_RETRIES || !/EADDRINUSE/.test(entry.tail)) throw err;
      children.splice(children.indexOf(entry), 1);
      console.log(
        `${entry.label}: a port was taken before it listened (${exitReason(entry)}); starting it again`,
      );
      entry = await startOne(entry.name, entry.index, true);
    }
  }
}

// A service still running this long after SIGTERM is killed: the teardown below removes whatever
// it was making, and every piece of work it held is redelivered to the next run.
const STOP_GRACE_MS = 6_000;
let cli;

async function stopAll(code) {
  if (stopping) return;
  stopping = true;
  console.log('\nstopping services …');
  if (cli?.exitCode === null) cli.kill('SIGTERM');
  for (const { child } of children) if (child.exitCode === null) child.kill('SIGTERM');
  const killer = setTimeout(() => {
    for (const { label, child } of children) {
      if (child.exitCode === null && child.signalCode === null) {
        console.error(`${label} did not stop in ${STOP_GRACE_MS / 1000} s; killing it`);
        child.kill('SIGKILL');
      }
    }
  }, STOP_GRACE_MS);
  // Once no pod-lifecycle runs, nothing makes a sandbox any more: the run's are destroyed while
  // the other services finish stopping.
  const lifecycles = children.filter((c) => c.label.startsWith('pod-lifecycle'));
  const teardown = Promise.all(lifecycles.map((c) => c.exited)).then(() => tearDownRun());
  const results = await Promise.all(children.map((c) => c.exited));
  clearTimeout(killer);
  children.forEach((c, i) => {
    console.log(`  ${c.label}: exited ${results[i].signal ?? results[i].code}`);
  });
  console.log(`  sandboxes of this run: ${await teardown}`);
  if (localNats) console.log(`  embedded NATS: exited ${await localNats.stop()}`);
  if (localRedis) console.log(`  embedded Redis: exited ${await localRedis.stop()}`);
  process.exit(code);
}

/**
 * `npm start` owns its run: every sandbox it made (warm pool members, live sandboxes, running
 * jobs') is destroyed when it stops, by pod-lifecycle's one-shot teardown (docs/services.md,
 * "Ending a run"); queued jobs stay for the next run. Resolves with a line for the summary.
 */
async function tearDownRun() {
  if (!redisUrl || children.length === 0) return 'none (no services ran)';
  const log = createWriteStream(join(logDir, 'teardown.log'));
  // Detached: a second Ctrl-C on the terminal must not stop the cleanup half-way.
  const child = spawn(
    process.execPath,
    [join(root, 'services', 'pod-lifecycle', 'dist', 'teardown-main.js')],
    {
      cwd: root,
      env: runEnv({ SANDSTREAM_TEARDOWN_REASON: 'npm start stopped' }),
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    },
  );
  let last = '';
  child.stdout.on('data', (chunk) => {
    log.write(chunk);
    last = (last + chunk.toString()).split('\n').slice(-2).join('\n');
  });
  child.stderr.pipe(log, { end: false });
  const exitCode = await new Promise((resolve) => child.once('exit', (c) => resolve(c)));
  log.end();
  try {
    const r = JSON.parse(last.trim());
    if (r.msg !== 'run torn down') throw new Error(r.err);
    const counts = `${r.jobsEnded} jobs and live sandboxes ended (cancelled), ${r.poolMembers} warm pool members, ${r.unrecorded} others`;
    return exitCode === 0
      ? `destroyed: ${counts}`
      : `${r.failed} not destroyed (see ${logDir}/teardown.log); ${counts}`;
  } catch {
    return `teardown exited ${exitCode} (see ${logDir}/teardown.log)`;
  }
}
process.on('SIGINT', () => void stopAll(0));
process.on('SIGTERM', () => void stopAll(0));

/** Whether nats-server can run here: installed, or installed now (as root); never fatal. */
function natsServerAvailable() {
  if (env.SANDSTREAM_SKIP_BOOTSTRAP === '1') return isInstalled('nats-server');
  return ensurePackages(['nats-server'], { required: false, purpose: 'the log archive of `npm start`' });
}

try {
  if (natsUrl) {
    console.log(
      `NATS ${natsUrl.replace(/\/\/[^@]*@/, '//***@')}: log archive on (LOG_ARCHIVE=off turns it off)`,
    );
  } else if (env.LOG_ARCHIVE === 'off') {
    console.log('NATS: none (LOG_ARCHIVE=off): no log archive');
  } else if (!natsServerAvailable()) {
    console.log(
      'NATS: nats-server is not installed, so no log archive (apt-get install nats-server, or set NATS_URL)',
    );
  } else {
    localNats = await startLocalNats({ cacheDir });
    natsUrl = localNats.url;
    console.log(
      `NATS: embedded, 127.0.0.1:${localNats.port} (JetStream log archive in .cache/nats; NATS_URL uses another)`,
    );
  }
  if (redisUrl) {
    console.log(`Redis ${redisUrl.replace(/\/\/[^@]*@/, '//***@')}, namespace ${namespace}`);
  } else {
    const gateway = sandboxBridgeGateway();
    localRedis = await startLocalRedis({
      cacheDir,
      namespace,
      ...(natsUrl ? { natsUrl } : {}),
      ...(gateway ? { extraBind: [gateway] } : {}),
    });
    redisUrl = localRedis.url;
    console.log(
      `Redis: embedded, 127.0.0.1${gateway ? ` and ${gateway} (the Docker sandbox bridge)` : ''}:${localRedis.port} (data and AOF in .cache/redis, credentials in .cache/sandstream/local.json; REDIS_URL uses another), namespace ${namespace}`,
    );
  }
  if (dockerSandboxes() && env.SANDSTREAM_DOCKER_EGRESS !== 'off' && env.SANDSTREAM_SKIP_BOOTSTRAP !== '1') {
    // Each Docker sandbox's egress policy is a set of iptables rules pod-lifecycle installs
    // (docs/sandbox-backends.md, "Reach"); without iptables every Docker sandbox start fails, saying so.
    ensurePackages(['iptables'], { required: false, purpose: 'the egress rules of Docker sandboxes' });
  }
  for (const name of SERVICES) for (let i = 0; i < scale[name]; i++) await startOne(name, i);
  await Promise.all(children.slice().map((c) => readyOrRestarted(c)));
  starting = false;
  for (const c of children) {
    const metrics = c.metricsPort === undefined ? '' : `, metrics :${c.metricsPort}`;
    const api =
      c.apiPort === undefined ? '' : `, HTTP API and web console http://127.0.0.1:${c.apiPort} (docs /docs)`;
    console.log(`✓ ${c.label} ready (pid ${c.child.pid}, health :${c.port}${metrics}${api})`);
  }
} catch (err) {
  console.error(`✗ ${err.message}`);
  await stopAll(1);
}

if (!values['no-job']) {
  console.log(`\n$ sandstream submit ${values.job} --follow\n`);
  cli = spawn(
    process.execPath,
    [join(root, 'libs/client/dist/cli/main.js'), 'submit', values.job, '--follow'],
    {
      cwd: root,
      env: runEnv(),
      stdio: 'inherit',
    },
  );
  const code = await new Promise((resolve) => cli.once('exit', (c) => resolve(c)));
  if (!stopping) console.log(`\njob finished (sandstream exit code ${code}).`);
}
if (!stopping) console.log('services keep running; press Ctrl-C to stop them.');
