import { createServer, type Socket } from 'node:net';
import { fastDecodeStep } from '@sandstream/wire/lean';
import { Redis } from 'ioredis';
import { parseConfig } from './config.js';
import { connectionOptions } from './redis-connections.js';

/**
 * Work every boot does, done once while the single executable's startup snapshot is built
 * (snapshot-main.ts), so that what it compiles and builds is in the snapshot instead of being
 * redone on every start. Pure functions of their arguments, and every handle is closed before
 * the snapshot is taken: nothing from the build machine gets into a sandbox.
 */

/**
 * Validation: V8 compiles the functions involved on their first call, so the configuration's and
 * a step's checks run once here, and are in the snapshot compiled. Both are zod-free (config.ts,
 * the wire's fast-step.ts): no schema is built, here or at boot.
 */
export function warmUpValidation(): void {
  parseConfig(['--redis-url', 'redis://127.0.0.1:6379', '--job-id', 'snapshot-warm-up'], {}, '/');
  // A step the fast decoder is not sure of would warm up nothing: fail the build rather than that.
  const step = fastDecodeStep(
    JSON.stringify({ schemaVersion: 1, stepId: 'warm-up', command: 'true', args: ['x'] }),
  );
  if (!step) throw new Error('snapshot warm-up: the fast decoder refused its sample step');
}

/**
 * The boot's way to its first heartbeat: a Redis client made as the agent makes its connections,
 * its socket connected, its connection name and one `SET … PX` written and their replies parsed,
 * then closed. Node's socket and stream code and ioredis's connect, write and parse paths are
 * compiled lazily, on first use: left out of the snapshot, they cost each start ~4 ms of CPU
 * between the first SET and its reply (issue 18; docs/benchmarks.md, "Fast start, part 1").
 * The other end is a listener on a loopback port of the build machine, answering `+OK` to each
 * command; it is closed, with the client, before the snapshot is taken.
 */
export async function warmUpFirstHeartbeat(): Promise<void> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    // Each command is a RESP array ("*<n>\r\n" at the start of a line); the values written
    // below hold no such line, so counting them counts the commands.
    socket.on('data', (chunk) =>
      socket.write('+OK\r\n'.repeat(chunk.toString().match(/^\*\d+\r$/gm)?.length ?? 0)),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  try {
    const { port } = server.address() as { port: number };
    const client = new Redis(`redis://127.0.0.1:${port}`, connectionOptions('snapshot-warm-up'));
    try {
      const value = JSON.stringify({ pid: 1, time: new Date(0).toISOString(), stepId: null });
      const reply = await client.set('snapshot-warm-up', value, 'PX', 3000);
      if (reply !== 'OK') throw new Error(`snapshot warm-up: SET answered ${reply}`);
    } finally {
      const ended = new Promise((resolve) => client.once('end', resolve));
      client.disconnect();
      await ended;
    }
  } finally {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
