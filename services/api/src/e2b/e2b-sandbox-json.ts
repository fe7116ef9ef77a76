import { type SandboxRecord, userJobId } from '@sandstream/bus';
import { z } from 'zod';

/**
 * A sandbox record as E2B's control plane describes one (its OpenAPI's ListedSandbox and
 * SandboxDetail): metadata are our labels, the template is its template (or image).
 */

/**
 * The envd version we answer: new enough that the SDK sends no default user and uses every call it
 * knows, including watchDir's includeEntry (0.6.3). Not 0.6.4: watching network mounts is not
 * served. From 0.6.2 the SDK sends file metadata (X-Metadata-* headers), which POST /files refuses.
 */
export const ENVD_VERSION = '0.6.3';

export const E2bStateSchema = z.enum(['running', 'paused']);
export type E2bState = z.infer<typeof E2bStateSchema>;

/** Our state as E2B's (a sandbox that ended is not listed: undefined). */
export function e2bStateOf(record: SandboxRecord): E2bState | undefined {
  if (record.state === 'paused' || record.state === 'pausing') return 'paused';
  if (record.state === 'closed' || record.state === 'failed' || record.state === 'closing') return undefined;
  return 'running';
}

export function listedSandbox(record: SandboxRecord) {
  const startedAt = record.readyAt ?? record.createdAt;
  const endAt = record.endsAt ?? startedAt + (record.spec.timeoutSeconds ?? 0) * 1000;
  const templateID = record.spec.template ?? record.spec.image ?? 'base';
  return {
    sandboxID: userJobId(record.id),
    templateID,
    alias: templateID,
    clientID: 'sandstream',
    startedAt: new Date(startedAt).toISOString(),
    endAt: new Date(endAt).toISOString(),
    // Our resources are requests and limits in Kubernetes' units, not E2B's counts: not told.
    cpuCount: 0,
    memoryMB: 0,
    diskSizeMB: 0,
    metadata: record.labels,
    state: e2bStateOf(record) ?? 'running',
    envdVersion: ENVD_VERSION,
    volumeMounts: [],
  };
}

/**
 * SandboxDetail and the create / connect answer. The envd access token is one of the sandbox's
 * own (e2b-sandbox-tokens.ts): the SDK sends it back on every in-sandbox call (X-Access-Token),
 * where it opens that sandbox's calls and nothing else.
 */
export function sandboxDetail(record: SandboxRecord, accessToken: string, domain: string | undefined) {
  return { ...listedSandbox(record), envdAccessToken: accessToken, domain: domain ?? null };
}
