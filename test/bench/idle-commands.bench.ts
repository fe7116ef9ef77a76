/**
 * Redis commands per second of each idle service (issue 32 §3): what an idle service's CPU goes
 * to is mostly its round trips to Redis, so this names them. Runs the four services and the API
 * on a private redis-server (so MONITOR sees only them), nothing submitted, and tallies MONITOR
 * lines per service (by the client's connection name) and per command.
 *
 *   npx tsc -b && npx vite-node test/bench/idle-commands.bench.ts [windowSeconds=30] [settleSeconds=5]
 */

import { sleep } from '@sandstream/bus';
import { freePort, RedisServer, startService } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { startStack } from '../helpers/services-stack.js';

const WINDOW_S = Number(process.argv[2] ?? 30);
const SETTLE_S = Number(process.argv[3] ?? 5);

async function main(): Promise<void> {
  const server = await RedisServer.start();
  const url = `redis://127.0.0.1:${server.port}`;
  const stack = await startStack({
    label: 'idle-cmds',
    env: { REDIS_URL: url },
    redis: () => new Redis(url),
  });
  const api = await startService('api', {
    ...stack.env,
    API_PORT: String(await freePort()),
    API_ANONYMOUS: 'loopback',
  });
  const admin = new Redis(url);
  const monitor = new Redis(url);
  try {
    await sleep(SETTLE_S * 1000);
    const names = new Map<string, string>();
    const readNames = async () => {
      const list = (await admin.client('LIST')) as string;
      for (const line of list.split('\n')) {
        const addr = /addr=(\S+)/.exec(line)?.[1];
        const name = /name=(\S*)/.exec(line)?.[1];
        if (addr) names.set(addr, name || '(unnamed)');
      }
    };
    await readNames();
    const counts = new Map<string, number>();
    const m = await monitor.monitor();
    m.on('monitor', (_time: string, args: string[], source: string) => {
      const addr = source.split(' ').at(-1) ?? source;
      const who = (names.get(addr) ?? addr).replace(/:[^:]*$/, '');
      const key = `${who.padEnd(40)} ${String(args[0]).toUpperCase()}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    });
    await sleep(WINDOW_S * 1000);
    m.disconnect();
    console.log(`Redis commands per second while idle (${WINDOW_S} s):`);
    for (const [key, n] of [...counts].sort((a, b) => b[1] - a[1])) {
      console.log(`  ${key.padEnd(60)} ${(n / WINDOW_S).toFixed(2)}/s`);
    }
  } finally {
    admin.disconnect();
    monitor.disconnect();
    await api.stop(5000);
    await stack.stop();
    await server.stop();
  }
}

await main();
