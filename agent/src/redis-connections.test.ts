import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { RedisServer } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { reconnectDelayMs } from './redis-connections.js';
import { pushStep, seaCommand, startAgent, stopAgent, takeResult } from './testing/agent-harness.js';

const exec = promisify(execFile);

/** Every command the agent sends; a per-sandbox ACL user needs these and nothing else. */
const AGENT_MINIMAL_COMMANDS = ['set', 'del', 'brpop', 'lpush', 'xadd', 'quit', 'client|setname'];
const cleanups: (() => Promise<unknown>)[] = [];

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
});

describe('reconnectDelayMs', () => {
  it('backs off exponentially from 50 ms and caps at 2 s', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 50].map(reconnectDelayMs)).toEqual([
      50, 100, 200, 400, 800, 1600, 2000, 2000,
    ]);
  });
});

describe('connecting', () => {
  // The single executable too: its node:tls is loaded on first use (a startup snapshot cannot hold it).
  it.each([
    ['node dist/main.js', undefined],
    ['the single executable', seaCommand()],
  ])(
    '%s speaks TLS (rediss://) as a password user confined by ACL to its own job keys',
    async (_name, command) => {
      const dir = await mkdtemp(join(tmpdir(), 'agent-tls-'));
      cleanups.push(() => rm(dir, { recursive: true, force: true }));
      const certFile = join(dir, 'cert.pem');
      const keyFile = join(dir, 'key.pem');
      await exec('openssl', [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        keyFile,
        '-out',
        certFile,
        '-days',
        '1',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
      ]);
      const certPem = await readFile(certFile, 'utf8');
      const jobId = `tls-acl-job-${command ? 'sea' : 'node'}`;
      const notify = 'completions:tls';
      // Least privilege: the job's own keys, write-only access to the notify stream, and exactly
      // the commands the agent sends (docs/agent.md lists them).
      const acl = `agent on >s3cret ~sandbox:${jobId}:* %W~${notify} resetchannels -@all ${AGENT_MINIMAL_COMMANDS.map((c) => `+${c}`).join(' ')}`;
      const server = await RedisServer.start({
        tls: { certFile, keyFile, certPem },
        args: ['--user', ...'default on nopass ~* &* +@all'.split(' '), '--user', ...acl.split(' ')],
      });
      cleanups.push(() => server.stop());
      const admin = new Redis(server.url, { tls: { ca: certPem }, maxRetriesPerRequest: null });
      cleanups.push(async () => admin.disconnect());

      const agent = startAgent({
        jobId,
        redisUrl: `rediss://agent:s3cret@127.0.0.1:${server.port}`,
        extraArgs: ['--notify-stream', notify],
        env: { NODE_EXTRA_CA_CERTS: certFile },
        command,
      });
      cleanups.push(() => stopAgent(agent));
      await pushStep(admin, agent.keys, {
        schemaVersion: 1,
        stepId: 'over-tls',
        command: 'echo',
        args: ['secure'],
      });
      expect(await takeResult(admin, agent.keys, 'over-tls')).toMatchObject({
        stepId: 'over-tls',
        exitCode: 0,
      });
      expect(await admin.xlen(notify)).toBe(1);
      const clients = await admin.client('LIST');
      expect(String(clients)).toMatch(/user=agent/);
      await pushStep(admin, agent.keys, { schemaVersion: 1, stepId: 'bye', kind: 'shutdown' });
      expect((await agent.exited).code).toBe(0);
      // The URL (with its password) never reaches the logs.
      expect(agent.stderr()).not.toContain('s3cret');
    },
  );

  it('exits 3 when its credentials are refused, without logging them', async () => {
    const server = await RedisServer.start({ args: ['--requirepass', 'right'] });
    cleanups.push(() => server.stop());
    const agent = startAgent({
      redisUrl: `redis://:wrong-password@127.0.0.1:${server.port}`,
      extraArgs: ['--idle-timeout-seconds', '0.5', '--max-idle-waits', '2'],
    });
    cleanups.push(() => stopAgent(agent));
    expect((await agent.exited).code).toBe(3);
    expect(agent.stderr()).not.toContain('wrong-password');
  });
});
