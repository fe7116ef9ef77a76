import { Redis } from 'ioredis';

/**
 * Counts the commands that clients whose connection name starts with `namePrefix` send to a
 * private redis-server, by MONITOR (a command a Lua script runs is not counted: MONITOR shows it
 * with the source `lua`, not the client). Connection names are read from CLIENT LIST when the
 * tally starts and again for an address not seen yet. For benches: MONITOR slows Redis down.
 */
export async function startCommandTally(
  url: string,
  namePrefix: string,
): Promise<{ stop: () => Promise<Map<string, number>> }> {
  const admin = new Redis(url);
  const monitor = new Redis(url);
  const names = new Map<string, string>();
  const readNames = async () => {
    const list = (await admin.client('LIST')) as string;
    for (const line of list.split('\n')) {
      const addr = /addr=(\S+)/.exec(line)?.[1];
      if (addr) names.set(addr, /name=(\S*)/.exec(line)?.[1] ?? '');
    }
  };
  await readNames();
  const counts = new Map<string, number>();
  const unknown = new Map<string, string[]>();
  const m = await monitor.monitor();
  m.on('monitor', (_time: string, args: string[], source: string) => {
    const addr = source.split(' ').at(-1) ?? source;
    const command = String(args[0]).toUpperCase();
    if (!names.has(addr)) {
      unknown.set(addr, [...(unknown.get(addr) ?? []), command]);
      return;
    }
    if (!names.get(addr)?.startsWith(namePrefix)) return;
    counts.set(command, (counts.get(command) ?? 0) + 1);
  });
  return {
    stop: async () => {
      m.disconnect();
      await readNames();
      // Connections made after the start (a reconnect): attributed once their name is known.
      for (const [addr, commands] of unknown) {
        if (!names.get(addr)?.startsWith(namePrefix)) continue;
        for (const command of commands) counts.set(command, (counts.get(command) ?? 0) + 1);
      }
      admin.disconnect();
      monitor.disconnect();
      return counts;
    },
  };
}
