#!/usr/bin/env node
// `npm test`: every test of the project, from a fresh clone. Bootstraps (dependencies, build,
// Docker engine and local images), then runs vitest over all workspaces and test/. Arguments
// after `--` go to vitest, e.g. `npm test -- libs/wire`.
//
// SANDSTREAM_TEST_DOCKER=skip runs without touching Docker (Docker suites then skip themselves
// outside CI, and fail in CI, where a missing engine is a defect).
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { bootstrap, root } from './bootstrap.mjs';
import { ensurePackages } from './system-packages.mjs';
import { ensureTestServers } from './test-servers.mjs';

const ci = process.env.CI === 'true';
const { env } = process;
const dockerMode = env.SANDSTREAM_TEST_DOCKER ?? (ci ? 'required' : 'optional');
// Tests start their own redis-server and nats-server, drive redis-cli, cover the ripgrep path and
// drive the CLI's terminal in tmux.
const { docker } = bootstrap({
  docker: dockerMode,
  // kubernetes-client: `kubectl kustomize` renders the deploy/k8s overlays; chromium: the web
  // console's browser test.
  packages: [
    'redis-server',
    'redis-tools',
    'nats-server',
    'ripgrep',
    'tmux',
    'kubernetes-client',
    'chromium',
  ],
});
// The compose stack test (test/e2e/compose.test.ts) brings docker-compose.yml up on the engine and
// scrapes it with a real Prometheus; outside CI a machine without them skips that test.
if (docker) {
  ensurePackages(['docker-compose', 'prometheus'], { required: ci, purpose: 'the compose stack test' });
  // The image-pull tests start their own registry (with and without basic auth) and pull from it.
  ensurePackages(['docker-registry', 'apache2-utils'], { required: ci, purpose: 'the image-pull tests' });
}
if (!docker && dockerMode !== 'skip') {
  console.warn('no Docker engine: the Docker suites skip themselves (under CI=true they fail)');
}

const stopServers = await ensureTestServers(env);
const reportFile = join(root, '.cache', 'vitest-report.json');
mkdirSync(join(root, '.cache'), { recursive: true });
const vitest = spawnSync(
  'npx',
  [
    'vitest',
    'run',
    '--reporter=default',
    '--reporter=json',
    `--outputFile.json=${reportFile}`,
    ...process.argv.slice(2),
  ],
  { cwd: root, stdio: 'inherit', env },
);
stopServers();

// One closing line any CI can read, whatever vitest's own summary looks like.
try {
  const report = JSON.parse(readFileSync(reportFile, 'utf8'));
  const skipped = report.numPendingTests + report.numTodoTests;
  console.log(`tests: ${report.numPassedTests} passed, ${report.numFailedTests} failed, ${skipped} skipped`);
} catch {
  console.log('tests: no report was written');
}
process.exit(vitest.status ?? 1);
