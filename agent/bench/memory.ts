import {
  popResult,
  pushStep,
  rssKb,
  startAgent,
  stopAgent,
  testClient,
  waitFor,
} from '../src/testing/agent-harness.js';

export interface MemoryReport {
  idleMb: number;
  chattyPeakMb: Record<string, number>;
}

/** (3) Agent RSS (VmRSS) when idle and its peak during chatty steps, sampled every 5 ms. */
export async function benchMemory(sizes = [200_000, 1_000_000]): Promise<MemoryReport> {
  const redis = testClient();
  const agent = startAgent({ jobId: `bench-mem-${process.pid}-${Date.now()}` });
  const pid = agent.child.pid as number;
  try {
    await waitFor('agent heartbeat', async () =>
      (await redis.exists(agent.keys.heartbeat)) ? true : undefined,
    );
    await new Promise((r) => setTimeout(r, 2000));
    const idleMb = rssKb(pid) / 1024;
    const chattyPeakMb: Record<string, number> = {};
    console.log('\n(3) agent RSS (goal <= 80 MB)');
    console.log(`    idle after start: ${idleMb.toFixed(1)} MB`);
    for (const size of sizes) {
      let peak = rssKb(pid);
      const sampler = setInterval(() => {
        peak = Math.max(peak, rssKb(pid));
      }, 5);
      await pushStep(redis, agent.keys, {
        schemaVersion: 1,
        stepId: `chatty-${size}`,
        command: 'seq',
        args: ['1', String(size)],
      });
      const result = await popResult(redis, agent.keys, 120);
      clearInterval(sampler);
      chattyPeakMb[String(size)] = peak / 1024;
      console.log(
        `    peak during seq 1 ${size}: ${(peak / 1024).toFixed(1)} MB (dropped ${result.droppedLines?.toLocaleString('en-US')} lines)`,
      );
    }
    return { idleMb, chattyPeakMb };
  } finally {
    await stopAgent(agent);
    await redis.del(
      agent.keys.in,
      agent.keys.events,
      agent.keys.results,
      agent.keys.heartbeat,
      agent.keys.control,
    );
    redis.disconnect();
  }
}
