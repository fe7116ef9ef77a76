import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { registerBackendSuite } from '../testing/backend-suite.js';
import { DEFAULT_AGENT_ENTRY, InProcessBackend } from './inprocess-backend.js';

const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const root = join(tmpdir(), `sandstream-inprocess-test-${randomBytes(4).toString('hex')}`);
const registryKey = `sandstream:test:inprocess:${randomBytes(4).toString('hex')}`;

registerBackendSuite({
  name: 'in-process',
  skip: existsSync(DEFAULT_AGENT_ENTRY)
    ? false
    : `agent not built (${DEFAULT_AGENT_ENTRY}); run npx tsc -b agent`,
  redisUrl,
  createBackend: (redis) => new InProcessBackend({ redis, root, registryKey }),
  agent: { heartbeatIntervalMs: 200 },
  spec: { image: 'ignored-by-inprocess' },
  missingImage: false,
  leftovers: async (jobId) => {
    const jobs = await readdir(join(root, 'jobs')).catch(() => []);
    return jobs.filter((name) => name.startsWith(`${jobId}-`));
  },
  removePersistentWorkspace: (name) => rm(join(root, 'persistent', name), { recursive: true, force: true }),
});
