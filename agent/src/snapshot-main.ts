/**
 * The single executable's entry point: run once, at build time, to make a V8 startup snapshot
 * (build-sea.mjs, `useSnapshot`), so a sandbox's agent starts with every module of the agent
 * and its dependencies already loaded and initialised, instead of compiling and running the
 * bundle's module code on every start (most of the boot's CPU beyond Node's own, issue 18).
 *
 * What runs here at build time must leave nothing a later process could not use: no handles
 * (sockets, timers, child processes), nothing read from the environment, clocks or the file
 * system. Module initialisation in the agent and its dependencies does none of that (the step
 * spans' clock anchor is taken on first use for this reason); `node:tls`, whose bindings a
 * Node 20 snapshot cannot hold, is loaded on first use (build-sea.mjs, lazy-builtins).
 * Everything the process needs from the outside (argv, environment, cwd) is read by runCli, in
 * the deserialised main function, at run time.
 */
import { startupSnapshot } from 'node:v8';
import { decodeStep } from '@sandstream/wire';
import { runCli } from './cli.js';
import { parseConfig } from './config.js';
import { exitWhenDone, tuneV8ForSize } from './v8-tuning.js';

/**
 * Validation every run does, done once here: zod builds each schema's parser on its first parse
 * (generated code included), and V8 compiles the functions involved on their first call. Done
 * at build time, both are in the snapshot: the first parse of the configuration costs 0.3 ms
 * instead of 2.7, the first step's 0.1 ms instead of 1.4 (measured under node --snapshot-blob).
 * Pure functions of their arguments: nothing from this machine gets in.
 */
function warmUp(): void {
  parseConfig(['--redis-url', 'redis://127.0.0.1:6379', '--job-id', 'snapshot-warm-up'], {}, '/');
  // A refused sample would warm up the error path instead: fail the build rather than that.
  const step = decodeStep(
    JSON.stringify({ schemaVersion: 1, stepId: 'warm-up', command: 'true', args: ['x'] }),
  );
  if (!step.ok) throw new Error(`snapshot warm-up: ${step.error}`);
}

warmUp();

startupSnapshot.setDeserializeMainFunction(() => {
  // Set in each process: V8 flags are not part of the snapshot.
  tuneV8ForSize();
  // runCli installs its signal handlers synchronously, before its first await.
  exitWhenDone(runCli());
});
