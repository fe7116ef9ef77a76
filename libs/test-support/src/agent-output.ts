import type { ChainableCommander } from 'ioredis';

/**
 * Output lines `from..to` of step s1 on a sandbox's events stream, as the agent XADDs them (one
 * pipeline): what the log archive and the follow paths read, without running an agent.
 */
export async function addOutputLines(
  redis: { pipeline(): ChainableCommander },
  eventsStream: string,
  from: number,
  to: number,
): Promise<void> {
  const pipeline = redis.pipeline();
  for (let seq = from; seq <= to; seq++) {
    pipeline.xadd(
      eventsStream,
      '*',
      'event',
      JSON.stringify({ kind: 'stdout', stepId: 's1', seq, line: `line ${seq}` }),
    );
  }
  await pipeline.exec();
}
