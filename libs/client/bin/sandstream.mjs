#!/usr/bin/env node
// The CLI as modules (bin/sandstream, the `sandstream` command, runs this when its start-up
// snapshot is missing or stale; tests run it directly). A committed file, not dist/cli/main.js
// itself: npm links a workspace's bin when it installs, and on a fresh clone dist/ does not
// exist yet then.
try {
  await import('../dist/cli/main.js');
} catch (err) {
  if (err?.code !== 'ERR_MODULE_NOT_FOUND' || !String(err.message).includes('/dist/cli/main.js')) throw err;
  process.stderr.write(
    'sandstream: the CLI is not built yet; run `npm run build` (npm start and npm test build it)\n',
  );
  process.exitCode = 3;
}
