import { createKeySpace, scopedJobId } from '@sandstream/bus';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type ApiStack, startApiStack } from '../helpers/api-stack.js';
import { type apiClient, servedApiClient, sseEvents } from './api-client.js';

// Ids are scoped per tenant (issue 28, item 6): two tenants use the same sandbox id and the same
// job id through the real API and services, each works on its own, neither sees nor touches the
// other's, and the queue figures are each tenant's own (an admin's are everyone's).

let s: ApiStack;
let call: ReturnType<typeof apiClient>;
const keys: Record<'acme' | 'globex' | 'admin', string> = { acme: '', globex: '', admin: '' };

interface Sandbox {
  id: string;
  tenant: string;
  spec: { id?: string };
}
interface ExecResult {
  exitCode: number | null;
  stdout: string;
}

beforeAll(async () => {
  s = await startApiStack({ label: 'api-tenant-ids' });
  call = await servedApiClient(s);
  keys.acme = (await s.key('acme')).key;
  keys.globex = (await s.key('globex')).key;
  keys.admin = (await s.key('ops', true)).key;
}, 120_000);

afterAll(async () => {
  await s?.stop();
}, 60_000);

/** A job's output lines and final state, from its event stream. */
async function jobOutput(key: string, id: string): Promise<{ lines: string[]; state: string }> {
  const res = await s.request(`/v1/jobs/${id}/events`, { key });
  expect(res.status).toBe(200);
  const lines: string[] = [];
  let state = '';
  for await (const e of sseEvents(res)) {
    if (e.event === 'output') lines.push((e.data as { line: string }).line);
    if (e.event === 'state') state = (e.data as { to: string }).to;
  }
  return { lines, state };
}

describe('ids per tenant', () => {
  it('two tenants both have my-sandbox (and seed 003 ids): each works on its own, neither sees the other', async () => {
    for (const [tenant, key] of [
      ['acme', keys.acme],
      ['globex', keys.globex],
    ] as const) {
      const created = await call<Sandbox>('POST', '/v1/sandboxes', { key, json: { id: 'my-sandbox' } });
      expect(created.status, tenant).toBe(201);
      expect(created.body.id).toBe('my-sandbox');
      expect(created.body.tenant).toBe(tenant);
      expect(created.body.spec.id).toBe('my-sandbox');
      // Seed 003's path, with its body.
      const seed = await call<Sandbox>('POST', '/api/sandbox', { key, json: { id: 'seed-box' } });
      expect(seed.status, tenant).toBe(201);
      expect(seed.body.id).toBe('seed-box');
      const wrote = await call('PUT', '/api/sandbox/seed-box/fs', {
        key,
        json: { path: '/who.txt', content: `seed of ${tenant}` },
      });
      expect(wrote.status).toBe(200);
      expect(
        (await call('PUT', `/v1/sandboxes/my-sandbox/fs?path=who.txt`, { key, body: `I am ${tenant}` }))
          .status,
      ).toBe(200);
    }
    // Each exec runs in its own tenant's sandbox: the file each wrote, and only that one.
    for (const tenant of ['acme', 'globex'] as const) {
      const key = keys[tenant];
      const ran = await call<ExecResult>('POST', '/v1/sandboxes/my-sandbox/exec', {
        key,
        json: { command: 'cat who.txt' },
      });
      expect(ran.status).toBe(200);
      expect(ran.body.stdout).toBe(`I am ${tenant}\n`);
      const seed = await call<ExecResult>('POST', '/api/sandbox/seed-box/exec', {
        key,
        json: { command: 'cat who.txt' },
      });
      expect(seed.body.stdout).toBe(`seed of ${tenant}\n`);
      const listed = await call<Sandbox[]>('GET', '/v1/sandboxes', { key });
      expect(listed.body.map((b) => [b.id, b.tenant]).sort()).toEqual([
        ['my-sandbox', tenant],
        ['seed-box', tenant],
      ]);
    }
    // Below the API they are two records under two internal ids; the plain id is nobody's.
    const redis = s.stack.redis;
    const keySpace = createKeySpace(s.stack.namespace);
    for (const tenant of ['acme', 'globex'])
      expect(await redis.hget(keySpace.job(scopedJobId(tenant, 'my-sandbox')), 'tenant')).toBe(tenant);
    expect(await redis.exists(keySpace.job('my-sandbox'))).toBe(0);

    // An admin names the tenant whose ids it means, and sees both in a list.
    const asGlobex = await call<Sandbox>('GET', '/v1/sandboxes/my-sandbox', {
      key: keys.admin,
      headers: { 'x-sandstream-tenant': 'globex' },
    });
    expect([asGlobex.status, asGlobex.body.id, asGlobex.body.tenant]).toEqual([200, 'my-sandbox', 'globex']);
    const all = await call<Sandbox[]>('GET', '/v1/sandboxes', { key: keys.admin });
    expect(
      all.body
        .filter((b) => b.id === 'my-sandbox')
        .map((b) => b.tenant)
        .sort(),
    ).toEqual(['acme', 'globex']);
    // A key cannot name another tenant's ids.
    const forged = await call('GET', '/v1/sandboxes/my-sandbox', {
      key: keys.acme,
      headers: { 'x-sandstream-tenant': 'globex' },
    });
    expect(forged.status).toBe(403);

    // Closing acme's leaves globex's running.
    expect((await call<Sandbox>('DELETE', '/v1/sandboxes/my-sandbox', { key: keys.acme })).body.id).toBe(
      'my-sandbox',
    );
    const still = await call<ExecResult>('POST', '/v1/sandboxes/my-sandbox/exec', {
      key: keys.globex,
      json: { command: 'cat who.txt' },
    });
    expect(still.body.stdout).toBe('I am globex\n');
    for (const [tenant, key] of Object.entries(keys)) {
      if (tenant === 'admin') continue;
      await call('DELETE', '/v1/sandboxes/my-sandbox', { key });
      await call('DELETE', '/api/sandbox/seed-box', { key });
    }
  }, 180_000);

  it("the same job id in two tenants makes two jobs; another tenant's id answers as a missing one", async () => {
    for (const tenant of ['acme', 'globex'] as const) {
      const submitted = await call<{ jobId: string; created: boolean }>('POST', '/v1/jobs', {
        key: keys[tenant],
        json: { id: 'build-1', steps: [{ command: 'echo', args: [`built by ${tenant}`] }] },
      });
      expect([submitted.status, submitted.body.jobId, submitted.body.created], tenant).toEqual([
        201,
        'build-1',
        true,
      ]);
    }
    for (const tenant of ['acme', 'globex'] as const) {
      expect(await jobOutput(keys[tenant], 'build-1')).toEqual({
        lines: [`built by ${tenant}`],
        state: 'succeeded',
      });
      const job = await call<{ id: string; tenant: string }>('GET', '/v1/jobs/build-1', {
        key: keys[tenant],
      });
      expect([job.body.id, job.body.tenant]).toEqual(['build-1', tenant]);
      const list = await call<{ id: string }[]>('GET', '/v1/jobs', { key: keys[tenant] });
      expect(list.body.map((j) => j.id)).toContain('build-1');
      expect(list.body.map((j) => j.id).filter((id) => id.startsWith('t.'))).toEqual([]);
    }

    // globex asking for acme's own ids gets exactly what an id nobody has gets.
    await call('POST', '/v1/sandboxes', { key: keys.acme, json: { id: 'acme-box' } });
    await call('POST', '/v1/jobs', {
      key: keys.acme,
      json: { id: 'acme-job', steps: [{ command: 'sleep', args: ['60'] }] },
    });
    const probes = (sandbox: string, job: string): [string, string, unknown?][] => [
      ['GET', `/v1/sandboxes/${sandbox}`],
      ['POST', `/v1/sandboxes/${sandbox}/exec`, { command: 'true' }],
      ['GET', `/v1/sandboxes/${sandbox}/fs?path=x`],
      ['GET', `/v1/sandboxes/${sandbox}/events?follow=false`],
      ['GET', `/api/sandbox/${sandbox}/ls`],
      ['DELETE', `/v1/sandboxes/${sandbox}`],
      ['GET', `/v1/jobs/${job}`],
      ['GET', `/v1/jobs/${job}/events`],
      ['DELETE', `/v1/jobs/${job}`],
    ];
    const answers = async (sandbox: string, job: string) => {
      const out: [number, string][] = [];
      for (const [method, path, json] of probes(sandbox, job)) {
        const answer = await call<{ detail: string }>(method, path, {
          key: keys.globex,
          ...(json ? { json } : {}),
        });
        out.push([answer.status, answer.body.detail.replace(sandbox, '<id>').replace(job, '<id>')]);
      }
      return out;
    };
    const theirs = await answers('acme-box', 'acme-job');
    expect(theirs.every(([status]) => status === 404)).toBe(true);
    expect(theirs).toEqual(await answers('nobody-box', 'nobody-job'));
    // And nothing of globex's probing touched acme's.
    expect(
      (await call<{ state: string }>('GET', '/v1/jobs/acme-job', { key: keys.acme })).body.state,
    ).not.toBe('cancelled');
    // A job id globex submits that acme has is globex's new job, not acme's existing one.
    const mine = await call<{ created: boolean }>('POST', '/v1/jobs', {
      key: keys.globex,
      json: { id: 'acme-job', steps: [{ command: 'true' }] },
    });
    expect([mine.status, mine.body.created]).toEqual([201, true]);
    await call('DELETE', '/v1/jobs/acme-job', { key: keys.acme });
    await call('DELETE', '/v1/sandboxes/acme-box', { key: keys.acme });
  }, 180_000);

  it('a reserved or over-long id is refused by field', async () => {
    const reserved = await call<{ errors: { field: string }[] }>('POST', '/v1/sandboxes', {
      key: keys.acme,
      json: { id: scopedJobId('globex', 'x') },
    });
    expect([reserved.status, reserved.body.errors[0]?.field]).toEqual([400, 'body.id']);
    const long = await call<{ detail: string }>('POST', '/v1/jobs', {
      key: keys.acme,
      json: { id: 'x'.repeat(110), steps: [{ command: 'true' }] },
    });
    expect([long.status, long.body.detail]).toEqual([400, 'body.id is at most 109 characters']);
  });

  it("queue figures are the tenant's own; an admin's are every tenant's", async () => {
    type Figures = ({ name: string } & Record<string, number>)[];
    /** Every entry of the queue, whatever its state. */
    const total = (f: Figures, name: string) => {
      const q = f.find((x) => x.name === name);
      if (!q) return -1;
      return ['waiting', 'active', 'delayed', 'prioritized', 'completed', 'failed']
        .map((state) => q[state] ?? 0)
        .reduce((a, b) => a + b, 0);
    };
    const figures = async (key: string) => (await call<Figures>('GET', '/v1/queues', { key })).body;
    // One more job for globex than for acme (the earlier tests gave each the same number).
    const before = {
      acme: total(await figures(keys.acme), 'jobs'),
      globex: total(await figures(keys.globex), 'jobs'),
    };
    await call('POST', '/v1/jobs', { key: keys.globex, json: { steps: [{ command: 'true' }] } });
    await call('POST', '/v1/jobs', { key: keys.globex, json: { steps: [{ command: 'true' }] } });
    await call('POST', '/v1/jobs', { key: keys.acme, json: { steps: [{ command: 'true' }] } });
    // A replica counts every tenant's entries at most every 2 s: wait for a count after these.
    let after = { acme: 0, globex: 0, admin: 0 };
    await vi
      .waitUntil(
        async () => {
          after = {
            acme: total(await figures(keys.acme), 'jobs'),
            globex: total(await figures(keys.globex), 'jobs'),
            admin: total(await figures(keys.admin), 'jobs'),
          };
          return after.acme !== before.acme;
        },
        { timeout: 15_000, interval: 250 },
      )
      .catch(() => {});
    expect(after.acme - before.acme).toBe(1);
    expect(after.globex - before.globex).toBe(2);
    expect(after.admin).toBeGreaterThanOrEqual(after.acme + after.globex);
  }, 60_000);
});
