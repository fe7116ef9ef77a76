/**
 * MCP's cost over the SDK (issue 34): `run_command` of `true` through `sandstream mcp` (the built
 * CLI, over stdio, on Redis) against the SDK's own `exec(['sh', '-c', 'true'])` on the same
 * sandbox, in the same run, one of each per round (order alternating); p50 and p99 of each and
 * the p50 difference (goal: at most +2 ms). The same over HTTP too: run_command through the
 * API's /mcp against the SDK over HTTP (`exec` of the same), for the record.
 *
 *   npm run build && npx vite-node test/bench/mcp.bench.ts [rounds]
 */
import { SandstreamClient } from '@sandstream/client';
import { summarize } from '@sandstream/test-support';
import { callTool, httpConnection, stdioConnection } from '../api/mcp-clients.js';
import { startApiStack } from '../helpers/api-stack.js';

const ROUNDS = Number(process.argv[2] ?? 300);
const ms = (n: number) => `${n.toFixed(2)} ms`;

const s = await startApiStack({ label: 'mcp-bench', apiEnv: { API_RATE_LIMIT_PER_MINUTE: '1000000' } });
const key = (await s.key('bench')).key;
const http = new SandstreamClient({ url: s.url, apiKey: key });
const stdio = await stdioConnection([], { REDIS_URL: s.redisUrl, SANDSTREAM_NAMESPACE: s.stack.namespace });
const overHttp = await httpConnection(s.url, key);
try {
  const sandbox = await s.stack.client.sandboxes.create({ image: 'debian:bookworm-slim' });
  const httpId = (await callTool(overHttp.client, 'create_sandbox', {})).structured.sandboxId as string;
  const httpSandbox = http.sandboxes.handle(httpId);
  const check = async (answer: Promise<{ structured: Record<string, unknown> }>) => {
    const { structured } = await answer;
    if (structured.exitCode !== 0) throw new Error(`run_command answered ${JSON.stringify(structured)}`);
  };
  const ways: [string, () => Promise<unknown>][] = [
    ['SDK over Redis: exec(sh -c true)', () => sandbox.exec(['sh', '-c', 'true'])],
    [
      'MCP stdio (sandstream mcp, Redis): run_command true',
      () => check(callTool(stdio.client, 'run_command', { sandboxId: sandbox.id, command: 'true' })),
    ],
    ['SDK over HTTP: exec(sh -c true)', () => httpSandbox.exec(['sh', '-c', 'true'])],
    [
      'MCP over HTTP (/mcp): run_command true',
      () => check(callTool(overHttp.client, 'run_command', { sandboxId: httpId, command: 'true' })),
    ],
  ];
  const samples = new Map(ways.map(([name]) => [name, [] as number[]]));
  for (let i = 0; i < 30; i++) for (const [, run] of ways) await run();
  for (let round = 0; round < ROUNDS; round++) {
    // Pairs alternate their order (SDK then MCP, MCP then SDK) so that drift moves both alike.
    const order = round % 2 === 0 ? [0, 1, 2, 3] : [1, 0, 3, 2];
    for (const k of order) {
      const [name, run] = ways[k] as (typeof ways)[number];
      const t = performance.now();
      await run();
      samples.get(name)?.push(performance.now() - t);
    }
  }
  const stats = new Map([...samples].map(([name, xs]) => [name, summarize(xs)]));
  for (const [name, x] of stats) console.log(`${name} ×${x.n}: p50 ${ms(x.p50)} p99 ${ms(x.p99)}`);
  const diff = (mcp: string, sdk: string) => {
    const a = stats.get(mcp);
    const b = stats.get(sdk);
    return a && b ? a.p50 - b.p50 : Number.NaN;
  };
  const stdioDiff = diff(ways[1]?.[0] ?? '', ways[0]?.[0] ?? '');
  console.log(
    `MCP stdio − SDK over Redis at p50: ${stdioDiff >= 0 ? '+' : ''}${ms(stdioDiff)} (goal ≤ +2 ms: ${stdioDiff <= 2 ? 'met' : 'NOT met'})`,
  );
  const httpDiff = diff(ways[3]?.[0] ?? '', ways[2]?.[0] ?? '');
  console.log(`MCP over HTTP − SDK over HTTP at p50: ${httpDiff >= 0 ? '+' : ''}${ms(httpDiff)}`);
  await sandbox.close();
} finally {
  await stdio.disconnect();
  await overHttp.disconnect();
  await http.close();
  await s.stop();
}
