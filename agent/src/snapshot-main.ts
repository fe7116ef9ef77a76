/**
 * The single executable's entry point: run once, at build time, to make a V8 startup snapshot
 * (build-sea.mjs, `useSnapshot`), so a sandbox's agent starts with every module of the agent
 * and its dependencies already loaded and initialised, instead of compiling and running the
 * bundle's module code on every start (most of the boot's CPU beyond Node's own, issue 18).
 *
 * What runs here at build time must leave nothing a later process could not use: no handles
 * (sockets, timers, child processes) still open when the snapshot is taken (the warm-up's
 * loopback socket is closed before), nothing read from the environment, clocks or the file
 * system. Module initialisation in the agent and its dependencies does none of that (the step
 * spans' clock anchor is taken on first use for this reason); `node:tls`, whose bindings a
 * Node 20 snapshot cannot hold, is loaded on first use (build-sea.mjs, lazy-builtins).
 * Everything the process needs from the outside (argv, environment, cwd) is read by runCli, in
 * the deserialised main function, at run time.
 */
import { startupSnapshot } from 'node:v8';
import { runCli } from './cli.js';
import { warmUpFirstHeartbeat, warmUpValidation } from './snapshot-warm-up.js';
import { exitWhenDone, tuneV8ForSize } from './v8-tuning.js';

warmUpValidation();
// Node's snapshot builder takes the snapshot once the event loop is empty, so after this ends;
// a failure fails the build.
warmUpFirstHeartbeat().catch((err: Error) => {
  process.stderr.write(`snapshot warm-up failed: ${err.stack ?? err.message}\n`);
  process.exit(1);
});

startupSnapshot.setDeserializeMainFunction(() => {
  // Set in each process: V8 flags are not part of the snapshot.
  tuneV8ForSize();
  // runCli installs its signal handlers synchronously, before its first await.
  exitWhenDone(runCli());
});
