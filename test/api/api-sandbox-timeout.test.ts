import { type Sandbox, SandstreamClient } from '@sandstream/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiStack, startApiStack } from '../helpers/api-stack.js';
import { runCli } from '../helpers/cli-run.js';

// sandbox.setTimeout(seconds) (E2B's meaning): the sandbox ends `seconds` after the call, sooner
// or later than its lifetime said, capped at the operator's maximum lifetime — enforced by the
// step-dispatcher's lifetime deadline, the one that closes it with reason `lifetime`.

const MAX_LIFETIME_SECONDS = 40;
let s: ApiStack;
let http: SandstreamClient;
const made: Sandbox[] = [];

beforeAll(async () => {
  s = await startApiStack({
    label: 'api-timeout',
    env: { SANDBOX_MAX_LIFETIME_SECONDS: String(MAX_LIFETIME_SECONDS) },
  });
  http = new SandstreamClient({ url: s.url });
}, 120_000);

afterAll(async () => {
  for (const sb of made) await sb.close().catch(() => {});
  await http?.close();
  await s?.stop();
}, 60_000);

const clients = (): Record<'redis' | 'http', SandstreamClient> => ({ redis: s.stack.client, http });

async function sandbox(client: SandstreamClient, timeoutSeconds?: number): Promise<Sandbox> {
  const sb = await client.sandboxes.create({
    image: 'debian:bookworm-slim',
    ...(timeoutSeconds !== undefined ? { timeoutSeconds } : {}),
  });
  made.push(sb);
  return sb;
}

/** Waits for it to end; answers when (epoch ms) and why. */
async function ended(sb: Sandbox, withinMs: number): Promise<{ at: number; reason: string | undefined }> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const info = await sb.info();
    if (info.state === 'closed' || info.state === 'failed') return { at: Date.now(), reason: info.reason };
    if (Date.now() > deadline) throw new Error(`sandbox ${sb.id} still ${info.state}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

describe.each(['redis', 'http'] as const)('setTimeout over %s', (transport) => {
  it('shortens: a sandbox with a long lifetime ends about N seconds after setTimeout(N)', async () => {
    const sb = await sandbox(clients()[transport]);
    const asked = Date.now();
    const { endsAt, capped } = await sb.setTimeout(3);
    expect(capped).toBe(false);
    expect(endsAt).toBeGreaterThanOrEqual(asked + 2_000);
    expect(endsAt).toBeLessThanOrEqual(Date.now() + 4_000);
    expect((await sb.info()).endsAt).toBe(endsAt);
    const end = await ended(sb, 20_000);
    expect(end.reason).toBe('lifetime');
    expect(end.at - asked).toBeGreaterThanOrEqual(2_500);
  }, 60_000);

  it('extends: a sandbox made to live 4 s is still up after 7 s, then ends', async () => {
    const sb = await sandbox(clients()[transport], 4);
    const asked = Date.now();
    await sb.setTimeout(10);
    await new Promise((r) => setTimeout(r, 7_000));
    expect((await sb.info()).state).toBe('ready');
    expect((await sb.exec('echo alive')).stdout).toBe('alive\n');
    const end = await ended(sb, 20_000);
    expect(end.reason).toBe('lifetime');
    expect(end.at - asked).toBeGreaterThanOrEqual(9_000);
  }, 60_000);
});

describe('setTimeout bounds', () => {
  it("is capped at the operator's maximum lifetime, counted from ready", async () => {
    const sb = await sandbox(http);
    const { endsAt, capped } = await sb.setTimeout(3600);
    expect(capped).toBe(true);
    const info = await sb.info();
    // The dispatcher counts from the moment it saw it ready, a few ms from the record's readyAt.
    const cap = (info.readyAt as number) + MAX_LIFETIME_SECONDS * 1000;
    expect(Math.abs(endsAt - cap)).toBeLessThan(2_000);
    expect(info.endsAt).toBe(endsAt);
  }, 60_000);

  it('refuses a bad number naming the field, and a closed sandbox', async () => {
    const sb = await sandbox(s.stack.client);
    await expect(sb.setTimeout(0)).rejects.toThrow(/timeoutSeconds is at least 1/);
    await expect(sb.setTimeout(1.5)).rejects.toThrow(/whole number/);
    await sb.close();
    await expect(sb.setTimeout(10)).rejects.toMatchObject({ name: 'SandboxClosedError' });
  }, 60_000);

  it('sandstream sandbox set-timeout <id> <seconds> moves it', async () => {
    const sb = await sandbox(http);
    const before = (await sb.info()).endsAt as number;
    const run = await runCli(['sandbox', 'set-timeout', sb.id, '30', '--url', s.url], {});
    expect(run.status, run.stderr).toBe(0);
    const { endsAt } = await sb.info();
    expect(run.stdout).toBe(`${sb.id} ends at ${new Date(endsAt as number).toISOString()}\n`);
    expect(endsAt).toBeLessThan(before);
    const capped = await runCli(['sandbox', 'set-timeout', sb.id, '3600', '--url', s.url], {});
    expect(capped.stdout).toMatch(/capped at the operator's maximum lifetime/);
  }, 60_000);
});
