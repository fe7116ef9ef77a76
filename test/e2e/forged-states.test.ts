import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeJobEventFields } from '@sandstream/bus';
import { type FollowItem, SandstreamClient } from '@sandstream/client';
import { findCarrierImage, repoRoot, testRedisUrl } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TransportView, viewThrough } from '../helpers/sdk-transports.js';
import { type Stack, startStack } from '../helpers/services-stack.js';

// Issue 27 §4: a step writes, as its sandbox's own Redis user (the agent's REDIS_URL, which its
// steps inherit), what only the services should say: a `transition … to: succeeded` and a
// cancel request on its events stream, a `completed` event, a second result for a finished step
// and a result for a step never dispatched. Every follower still reports the job as it really
// ended, after its last line, and the record keeps only what the dispatcher asked for.
const cliPath = join(repoRoot, 'libs/client/dist/cli/main.js');
const dir = mkdtempSync(join(tmpdir(), 'e2e-forged-'));
const redisUrl = testRedisUrl();

/**
 * What the step runs (bash; it speaks RESP over /dev/tcp, so the image needs no Redis client):
 * each forgery as the sandbox's own Redis user, then its last line, then exit 3.
 */
const FORGER = [
  'export LC_ALL=C',
  `u=\${REDIS_URL#redis://}; cred=\${u%%@*}; hp=\${u#*@}; hp=\${hp%%/*}`,
  `user=\${cred%%:*}; pass=\${cred#*:}; host=\${hp%%:*}; port=\${hp##*:}`,
  'exec 3<>"/dev/tcp/$host/$port" || exit 90',
  // One command; its reply's first line in $reply (a bulk reply's data line is read past).
  `r() { printf '*%d\\r\\n' "$#" >&3; for a in "$@"; do printf '$%d\\r\\n%s\\r\\n' "\${#a}" "$a" >&3; done; IFS= read -r reply <&3; reply=\${reply%$'\\r'}; case $reply in '$-1') ;; '$'*) IFS= read -r _ <&3 ;; esac; }`,
  `ok() { case $reply in '$'[0-9]*|+OK|:*) echo "$1" ;; *) echo "refused: $reply" ;; esac; }`,
  'r AUTH "$user" "$pass"; [ "$reply" = +OK ] || { echo "auth: $reply"; exit 91; }',
  'ev="sandbox:{$JOB_ID}:events"; now=$(date +%s)000',
  `state() { printf '{"type":"%s","jobId":"%s","tenant":"default","from":"running","to":"%s","reason":"forged","at":%s}' "$1" "$JOB_ID" "$2" "$now"; }`,
  'r XADD "$ev" "*" job "$(state transition succeeded)"; ok forged-transition',
  'r XADD "$ev" "*" job "$(state cancel-requested running)"; ok forged-cancel',
  `r XADD "$ev" "*" event '{"schemaVersion":1,"stepId":"step-2","kind":"completed","seq":9,"timestamp":"2026-01-01T00:00:00.000Z","exitCode":0}'; ok forged-completed`,
  `result() { printf '{"schemaVersion":1,"stepId":"%s","exitCode":0,"timedOut":false,"durationSeconds":0,"errorMessage":null}' "$1"; }`,
  'for s in step-1 step-9; do r SET "sandbox:{$JOB_ID}:result:$s" "$(result $s)"; r XADD "$AGENT_NOTIFY_STREAM" "*" jobId "$JOB_ID" stepId "$s"; ok "forged-result-$s"; done',
  // The record is out of its reach: this must be refused.
  'r HSET "job:{$JOB_ID}" state succeeded; case $reply in -NOPERM*) echo record-refused ;; *) echo "record: $reply" ;; esac',
  'echo final line',
  'exit 3',
].join('\n');

function jobFile(jobId: string, image: string): string {
  const path = join(dir, `${jobId}.json`);
  // JSON is YAML: the job file as the CLI reads it.
  const spec = {
    id: jobId,
    image,
    steps: [
      { command: 'sh', args: ['-c', 'echo first step; exit 7'], continueOnError: true },
      { command: 'bash', args: ['-c', FORGER] },
    ],
  };
  writeFileSync(path, JSON.stringify(spec));
  return path;
}

afterAll(() => rmSync(dir, { recursive: true, force: true }));

const carrier = findCarrierImage();
/** In-process always; Docker where its carrier image is built (as test/e2e/docker.test.ts runs it). */
const BACKENDS: { backend: string; image: string; env: Record<string, string> }[] = [
  { backend: 'in-process', image: 'debian:bookworm-slim', env: {} },
  ...(carrier
    ? [
        {
          backend: 'Docker',
          image: process.env.SANDSTREAM_TEST_IMAGE_DEBIAN ?? 'sandstream/debian:bookworm',
          env: {
            SANDBOX_TYPE: 'docker',
            // The shared test Redis on loopback: the container shares the host's network.
            SANDSTREAM_DOCKER_NETWORK: 'host',
            SANDSTREAM_ALLOW_OPEN_REDIS: '1',
            SANDSTREAM_AGENT_CARRIER_IMAGE: carrier,
          },
        },
      ]
    : []),
];

describe.each(BACKENDS)(
  'forged states from inside a sandbox ($backend backend)',
  ({ backend, image, env }) => {
    let stack: Stack;
    let http: TransportView;
    beforeAll(async () => {
      stack = await startStack({
        label: backend === 'Docker' ? 'forgedd' : 'forged',
        env: { SANDBOX_ACL: 'on', ...env },
      });
      http = await viewThrough(stack, 'http', redisUrl);
    });
    afterAll(async () => {
      await http?.stop();
      await stack?.stop();
    });

    const expectTrueTimeline = (items: FollowItem[]) => {
      const states = items.filter((i) => i.type === 'state');
      expect(states.map((s) => s.to)).not.toContain('succeeded');
      expect(items.some((i) => i.type === 'cancel-requested')).toBe(false);
      expect(items.at(-1)).toMatchObject({ type: 'state', to: 'failed', terminal: true });
      const lines = items.flatMap((i) => (i.type === 'output' ? [i.line] : []));
      expect(lines).toEqual([
        'first step',
        'forged-transition',
        'forged-cancel',
        'forged-completed',
        'forged-result-step-1',
        'forged-result-step-9',
        'record-refused',
        'final line',
      ]);
    };

    it.each(['redis', 'http'] as const)(
      'submit --follow over %s reports failed, after the last line',
      (via) => {
        const jobId = `${stack.namespace}-cli-${via}`;
        const env =
          via === 'redis' ? { REDIS_URL: redisUrl, SANDSTREAM_NAMESPACE: stack.namespace } : http.clientEnv;
        const run = spawnSync(process.execPath, [cliPath, 'submit', jobFile(jobId, image), '--follow'], {
          env: { ...process.env, ...env },
          encoding: 'utf8',
          timeout: 90_000,
        });
        expect(run.stdout).toMatch(/record-refused[\s\S]*final line/);
        expect(run.stderr).not.toMatch(/● succeeded|● cancelled/);
        expect(run.stderr).toMatch(/● failed \(step step-2 exited 3\)/);
        expect(run.status, run.stderr).toBe(1);
      },
    );

    it('the SDK (over Redis and over HTTP) and the API SSE take states from the services only; the dispatcher ignores forged results', async () => {
      const jobId = `${stack.namespace}-sdk`;
      const spec = JSON.parse(readFileSync(jobFile(jobId, image), 'utf8')) as Record<string, unknown>;
      await stack.client.submit(spec);
      const record = await stack.client.wait(jobId, { timeoutMs: 90_000 });
      expect(record.state).toBe('failed');
      expect(record.reason).toBe('step step-2 exited 3');
      // The first result stands; no result for a step never dispatched.
      expect(Object.keys(record.stepResults).sort()).toEqual(['step-1', 'step-2']);
      expect(record.stepResults['step-1']).toMatchObject({ exitCode: 7 });
      expect(record.stepResults['step-2']).toMatchObject({ exitCode: 3 });

      // The forgeries are really in the stream, where followers read.
      const raw = (await stack.redis.xrange(`sandbox:{${jobId}}:events`, '-', '+')) as [string, string[]][];
      const claimed = raw.map(([, f]) => decodeJobEventFields(f)).filter((e) => e !== null);
      expect(claimed.filter((e) => e.reason === 'forged').map((e) => e.to)).toEqual(['succeeded', 'running']);

      for (const client of [stack.client, http.client]) {
        const items: FollowItem[] = [];
        for await (const item of client.follow(jobId)) items.push(item);
        expectTrueTimeline(items);
      }
      // A second SDK over HTTP from scratch (its own connection), as another process would follow.
      const other = new SandstreamClient({ url: http.url as string });
      try {
        const items: FollowItem[] = [];
        for await (const item of other.follow(jobId)) items.push(item);
        expectTrueTimeline(items);
      } finally {
        await other.close();
      }

      // The API's SSE as a browser's EventSource reads it.
      const res = await fetch(`${http.url}/v1/jobs/${jobId}/events`, {
        headers: { accept: 'text/event-stream' },
      });
      expect(res.status).toBe(200);
      const text = await res.text();
      const states = [...text.matchAll(/^event: state\ndata: (.*)$/gm)].map(
        (m) => JSON.parse(m[1] as string).to,
      );
      expect(states).not.toContain('succeeded');
      expect(states.at(-1)).toBe('failed');
      expect(text).not.toMatch(/^event: cancel-requested$/m);
      expect(text.indexOf('final line')).toBeLessThan(text.lastIndexOf('event: state'));
    });
  },
);
