#!/usr/bin/env node
/**
 * sandstream-agent entry point. See cli.ts for flags and exit codes.
 *
 * The agent shares its sandbox's memory with the work it runs, so it asks V8 to favour size
 * over speed before anything else is loaded: measured on a 200,000-line step, this takes the
 * agent's peak RSS from ~120 MB to ~80 MB for no measurable loss of throughput (the agent is
 * bound by Redis round trips, not by JIT quality). The rest of the agent is imported only
 * afterwards, so the flags apply to all of its heap.
 */
import { setFlagsFromString } from 'node:v8';

setFlagsFromString('--optimize-for-size');
setFlagsFromString('--max-semi-space-size=1');

// Until the CLI has loaded and installed its own handlers nothing has started (no heartbeat,
// no step), so a stop signal in that window simply means a clean exit 0.
const exitEarly = () => process.exit(0);
process.on('SIGTERM', exitEarly);
process.on('SIGINT', exitEarly);

// Loaded afterwards (not a static import, which would be evaluated before the flags are set).
// No top-level await: the single-executable build bundles this file as CommonJS.
import('./cli.js')
  .then(({ runCli }) => {
    // runCli installs its handlers synchronously, before its first await: no gap between them.
    process.off('SIGTERM', exitEarly);
    process.off('SIGINT', exitEarly);
    return runCli();
  })
  .then(
    (code) => process.exit(code),
    (err: unknown) => {
      // The logger may not have loaded; write the one JSON line by hand.
      const error = err instanceof Error ? { message: err.message, stack: err.stack } : String(err);
      process.stderr.write(
        `${JSON.stringify({ time: new Date().toISOString(), level: 'error', msg: 'fatal error', error })}\n`,
      );
      process.exit(3);
    },
  );
