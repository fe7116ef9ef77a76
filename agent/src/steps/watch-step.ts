import type { WatchEvent, WatchStep } from '@sandstream/wire';
import { fsFailure, notADirectory } from './fs-errors.js';
import { failed } from './outcome.js';
import { resolveStepPath } from './resolve-path.js';
import type { StepContext, StepOutcome } from './step-context.js';
import { TreeWatcher } from './tree-watcher.js';

/**
 * Runs a watch step: inotify watches on the directory (and below it, where asked: tree-watcher.ts),
 * each change one stdout line of JSON (wire watch-event.ts), the first line once the watches
 * are in place. Ends on cancel (a client stopped watching), its timeout, or when the directory goes.
 */
export async function watchStep(step: WatchStep, ctx: StepContext): Promise<StepOutcome> {
  const root = resolveStepPath(ctx, step.workingDirectory, step.path);
  const notDirectory = await notADirectory(root);
  if (notDirectory) return notDirectory;
  if (ctx.signal.aborted) return failed('cancelled', 'cancelled before it started');
  // A failure while the watches are set up (the directory limit) ends the step before it starts.
  let early: string | undefined;
  let fail: (message: string) => void = (message) => {
    early ??= message;
  };
  const watcher = new TreeWatcher(
    root,
    step.recursive,
    (change) => ctx.onLine('stdout', JSON.stringify(change)),
    (message) => fail(message),
  );
  try {
    await watcher.start();
  } catch (err) {
    await watcher.close();
    return (
      fsFailure(err, 'path', root) ?? failed('io_error', `path ${root} cannot be watched: ${String(err)}`)
    );
  }
  if (early !== undefined) {
    await watcher.close();
    return failed('limit_exceeded', early);
  }
  return new Promise<StepOutcome>((resolve) => {
    let ended = false;
    const end = (outcome: StepOutcome) => {
      if (ended) return;
      ended = true;
      clearTimeout(timer);
      ctx.signal.removeEventListener('abort', onAbort);
      void watcher.close().then(() => resolve(outcome));
    };
    const onAbort = () => end({ ...failed('cancelled', 'the watch was stopped'), cancelled: true });
    const timer = setTimeout(
      () => end(failed('timed_out', `the watch ran ${step.timeoutSeconds} s, its limit`)),
      step.timeoutSeconds * 1000,
    );
    fail = (message) => end(failed('io_error', message));
    ctx.signal.addEventListener('abort', onAbort, { once: true });
    const watching: WatchEvent = { type: 'watching', name: '' };
    ctx.onLine('stdout', JSON.stringify(watching));
  });
}
