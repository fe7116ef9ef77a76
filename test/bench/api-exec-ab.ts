/**
 * Part 1 of api.bench.ts (exec(['true']) over HTTP against the SDK) for several API builds at
 * once, so that two builds are compared within one run: on this two-core machine the SDK's own
 * p50 moves by 40 % from one run to the next (1.64–2.41 ms in 18 consecutive runs), and the HTTP
 * figure with it, which hides a change of 0.1 ms between runs of one build and then the other.
 * Here each iteration runs the SDK's exec, then the same exec and GET /v1/pools through every
 * API process in turn (the order rotating), all on one stack and one sandbox.
 *
 *   API_AB='[{"name":"main","main":"/work/wt-main/services/api/dist/main.js"},
 *            {"name":"mine","main":"services/api/dist/main.js","env":{"X":"1"}}]' \
 *     npx vite-node test/bench/api-exec-ab.ts [iterations] [json|sse]
 *
 * The stack's own API (this tree's build) is measured too, as `stack`.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { loadavg } from 'node:os';
import { scopedJobId } from '@sandstream/bus';
import { freePort, keepAliveClient, summarize } from '@sandstream/test-support';
import { startApiStack } from '../helpers/api-stack.js';

interface ApiBuild {
  name: string;
  /** The build's services/api/dist/main.js. */
  main: string;
  env?: Record<string, string>;
}

const ITERATIONS = Number(process.argv[2] ?? 1000);
/** `sse`: exec asks for the event stream (as the SDK does) instead of the JSON answer. */
const AS_EVENTS = process.argv[3] === 'sse';
const WARM_UP = 200;
const builds = JSON.parse(process.env.API_AB ?? '[]') as ApiBuild[];
const s = await startApiStack({ label: 'api-ab', apiEnv: { API_RATE_LIMIT_PER_MINUTE: '1000000' } });
const children: ChildProcess[] = [];
try {
  const { key } = await s.key('bench');
  const auth = { authorization: `Bearer ${key}` };
  const apis = [{ name: 'stack', url: s.url }];
  for (const build of builds) {
    const port = await freePort();
    children.push(
      spawn(process.execPath, [build.main], {
        env: {
          ...process.env,
          ...s.stack.env,
          REDIS_URL: s.redisUrl,
          API_PORT: String(port),
          API_ANONYMOUS: 'loopback',
          API_DEFAULT_IMAGE: 'debian:bookworm-slim',
          API_RATE_LIMIT_PER_MINUTE: '1000000',
          HEALTH_PORT: String(await freePort()),
          ...build.env,
        },
        stdio: ['ignore', 'ignore', 'inherit'],
      }),
    );
    const url = `http://127.0.0.1:${port}`;
    for (let tries = 0; !(await fetch(`${url}/v1/pools`, { headers: auth }).catch(() => null))?.ok; tries++) {
      if (tries > 300) throw new Error(`${build.name} did not start`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    apis.push({ name: build.name, url });
  }
  const id = await s.createSandbox(key);
  // The API answers the tenant's own id; over Redis the SDK names it by the internal one.
  const sandbox = s.stack.client.sandboxes.handle(scopedJobId('bench', id));
  // One keep-alive connection per API, as api.bench.ts holds one.
  const clients = apis.map(() =>
    keepAliveClient(AS_EVENTS ? { ...auth, accept: 'text/event-stream' } : auth),
  );
  const send = (api: number, method: string, path: string, payload?: string) =>
    (clients[api] as ReturnType<typeof keepAliveClient>).send(`${apis[api]?.url}${path}`, method, payload);
  const body = JSON.stringify({ command: ['true'] });
  const sdk: number[] = [];
  const http = apis.map(() => [] as number[]);
  const floor = apis.map(() => [] as number[]);
  const loadBefore = loadavg()[0] ?? 0;
  for (let i = 0; i < WARM_UP + ITERATIONS; i++) {
    let t = performance.now();
    await sandbox.exec(['true']);
    if (i >= WARM_UP) sdk.push(performance.now() - t);
    for (let k = 0; k < apis.length; k++) {
      const api = (i + k) % apis.length; // no build always right after the SDK
      t = performance.now();
      const answer = await send(api, 'POST', `/v1/sandboxes/${id}/exec`, body);
      if (!AS_EVENTS) JSON.parse(answer);
      const exec = performance.now() - t;
      t = performance.now();
      JSON.parse(await send(api, 'GET', '/v1/pools'));
      if (i >= WARM_UP) {
        http[api]?.push(exec);
        floor[api]?.push(performance.now() - t);
      }
    }
  }
  const sdkP50 = summarize(sdk).p50;
  console.log(
    `exec(['true']), ${ITERATIONS} each; load ${loadBefore.toFixed(1)} -> ${(loadavg()[0] ?? 0).toFixed(1)}; SDK p50 ${sdkP50.toFixed(2)} ms`,
  );
  apis.forEach((api, j) => {
    const p50 = summarize(http[j] ?? []).p50;
    console.log(
      `  ${api.name.padEnd(12)} HTTP p50 ${p50.toFixed(2)} ms  (+${(p50 - sdkP50).toFixed(2)})  floor p50 ${summarize(floor[j] ?? []).p50.toFixed(2)} ms`,
    );
  });
  for (const client of clients) client.close();
  await fetch(`${s.url}/v1/sandboxes/${id}`, { method: 'DELETE', headers: auth });
} finally {
  for (const child of children) child.kill('SIGTERM');
  await s.stop();
}
