import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { join } from 'node:path';
import { repoRoot } from '@sandstream/test-support';

export interface StartScriptRun {
  child: ChildProcessWithoutNullStreams;
  /** Its stdout and stderr so far, interleaved as they came. */
  output: () => string;
  exited: Promise<number | null>;
}

/** `npm start` (scripts/start.mjs) with `args`, run from the repository root with exactly `env`. */
export function spawnStartScript(args: string[], env: NodeJS.ProcessEnv): StartScriptRun {
  const child = spawn(process.execPath, [join(repoRoot, 'scripts/start.mjs'), ...args], {
    cwd: repoRoot,
    env,
  });
  let out = '';
  const keep = (c: Buffer) => {
    out += c.toString();
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { child, output: () => out, exited };
}
