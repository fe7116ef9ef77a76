#!/usr/bin/env node
/**
 * sandstream-agent entry point under plain Node (`node dist/main.js`, `node
 * dist/sandstream-agent.cjs`). See cli.ts for flags and exit codes; the single executable starts
 * from snapshot-main.ts instead.
 *
 * The V8 size flags (v8-tuning.ts) are set before anything else is loaded, and the rest of the
 * agent is imported only afterwards, so they apply to all of its heap.
 */
import { exitWhenDone, tuneV8ForSize } from './v8-tuning.js';

tuneV8ForSize();

// Until the CLI has loaded and installed its own handlers nothing has started (no heartbeat,
// no step), so a stop signal in that window simply means a clean exit 0.
const exitEarly = () => process.exit(0);
process.on('SIGTERM', exitEarly);
process.on('SIGINT', exitEarly);

// Loaded afterwards (not a static import, which would be evaluated before the flags are set).
// No top-level await: the single-executable build bundles this file as CommonJS.
exitWhenDone(
  import('./cli.js').then(({ runCli }) => {
    // runCli installs its own handlers before its first await: no gap between them.
    process.off('SIGTERM', exitEarly);
    process.off('SIGINT', exitEarly);
    return runCli();
  }),
);
