import { fileURLToPath } from 'node:url';
import { ServiceProcess, testRedisUrl } from '@sandstream/test-support';
import { afterAll, describe, expect, it } from 'vitest';

// The lifecycle relay's own entry point, built (npx tsc -b services/reaper). What it relays is
// checked through the reaper process that hosts it by default (main.test.ts).
const entry = fileURLToPath(new URL('../dist/relay-main.js', import.meta.url));
const base = {
  REDIS_URL: testRedisUrl(),
  SANDSTREAM_NAMESPACE: `t-relaymain-${Math.random().toString(36).slice(2, 10)}`,
  HEALTH_PORT: '0',
};
const procs: ServiceProcess[] = [];

afterAll(async () => {
  for (const p of procs) await p.stop();
});

describe('lifecycle relay process', () => {
  it('refuses to start without NATS_URL, naming it', async () => {
    const p = new ServiceProcess(entry, base);
    procs.push(p);
    expect(await p.exitCode()).toBe(1);
    const fatal = await p.waitForLog((l) => l.level === 'fatal');
    expect(fatal.err).toContain('NATS_URL');
  });

  it('runs on its own: ready with its NATS connection, exits 0 on SIGTERM', async () => {
    const p = new ServiceProcess(entry, {
      ...base,
      NATS_URL: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
      // The machine's NATS is shared: no archive stream left behind (log-archiver.test.ts covers it).
      LOG_ARCHIVE: 'off',
    });
    procs.push(p);
    const started = await p.waitForLog((l) => l.msg === 'lifecycle-relay started');
    const ready = await fetch(`http://127.0.0.1:${started.healthPort}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ checks: { redis: 'ok', nats: 'ok' } });
    p.signal('SIGTERM');
    expect(await p.exitCode()).toBe(0);
  });
});
