import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

/**
 * The floor for starting an agent (issue 18): a bare `node` that opens a raw socket to Redis,
 * sends one SET of the key named on its command line, prints `ok` when Redis answers, and stays
 * connected (so its CPU can be read) unless its third argument is `exit`.
 */
const FLOOR_SCRIPT = `
const [port, key, then] = process.argv.slice(1);
const socket = require('node:net').connect(Number(port), '127.0.0.1', () => {
  const args = ['SET', key, String(process.pid)];
  socket.write('*' + args.length + '\\r\\n' + args.map((a) => '$' + Buffer.byteLength(a) + '\\r\\n' + a + '\\r\\n').join(''));
});
socket.once('data', () => {
  process.stdout.write('ok\\n');
  if (then === 'exit') socket.end(() => process.exit(0));
});`;

/** The floor's command line: SET `key` on the Redis at 127.0.0.1:`port`. */
export function floorArgv(port: number, key: string, then: 'stay' | 'exit' = 'stay'): string[] {
  return [process.execPath, '-e', FLOOR_SCRIPT, String(port), key, then];
}

/** Time to first line: spawns `argv`, resolves with the ms until a stdout line equals `line`, after the process exited. */
export async function msToFirstLine(argv: readonly string[], line: string): Promise<number> {
  const started = performance.now();
  const child = spawn(argv[0] as string, argv.slice(1), { stdio: ['ignore', 'pipe', 'ignore'] });
  // 'close', not 'exit': the last line may still be in the pipe when the process has exited.
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  let at: number | undefined;
  createInterface({ input: child.stdout }).on('line', (l) => {
    if (at === undefined && l === line) at = performance.now() - started;
  });
  const code = await exited;
  if (at === undefined)
    throw new Error(`${argv.slice(0, 3).join(' ')}… exited (${code}) without printing "${line}"`);
  return at;
}

/** Runs `count` of `task` with at most `concurrency` at a time; resolves with their rate per second. */
export async function ratePerSecond(
  count: number,
  concurrency: number,
  task: (i: number) => Promise<unknown>,
): Promise<number> {
  let next = 0;
  const started = performance.now();
  const worker = async () => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
  return count / ((performance.now() - started) / 1000);
}
