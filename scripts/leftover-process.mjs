// The embedded servers of `npm start` (Redis, NATS) write a pidfile; one left by an `npm start`
// that was killed still holds its data (an AOF, a JetStream store and its lock).
import { existsSync, readFileSync } from 'node:fs';

/**
 * Stops the process named in `pidFile` if it still runs `program` (a pid reused by something
 * else is left alone), and waits up to 10 s for it to go.
 *
 * @param {string} pidFile
 * @param {string} program the start of its command line, e.g. `redis-server`
 */
export async function stopLeftover(pidFile, program) {
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8').trim());
  let cmdline = '';
  try {
    cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return; // gone
  }
  if (!cmdline.startsWith(program)) return;
  process.kill(pid, 'SIGTERM');
  for (let i = 0; i < 100 && existsSync(`/proc/${pid}`); i++) await new Promise((r) => setTimeout(r, 100));
}
