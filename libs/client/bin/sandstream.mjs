#!/usr/bin/env node
// The `sandstream` command. A committed file, not dist/cli/main.js itself: npm links a
// workspace's bin when it installs, and on a fresh clone dist/ does not exist yet then.
try {
  await import('../dist/cli/main.js');
} catch (err) {
  if (err?.code !== 'ERR_MODULE_NOT_FOUND' || !String(err.message).includes('/dist/cli/main.js')) throw err;
  process.stderr.write(
    'sandstream: the CLI is not built yet; run `npm run build` (npm start and npm test build it)\n',
  );
  process.exitCode = 3;
}
