import type { SandboxRecord } from '@sandstream/bus';
import type { SandboxStats } from '@sandstream/client';

/**
 * One sample of E2B's SandboxMetric from our `stats()`, taken now (we keep no series: E2B's
 * `start`/`end` range is not kept either). CPU is the average since the sandbox became ready,
 * in percent of one core; E2B's counts we do not know (cpuCount, memCache) are 0, as are limits
 * the backend does not report.
 */
export function e2bMetricOf(record: SandboxRecord, stats: SandboxStats, now = Date.now()) {
  const since = record.readyAt ?? record.createdAt;
  const seconds = Math.max(1, (now - since) / 1000);
  return {
    timestamp: new Date(now).toISOString(),
    timestampUnix: Math.floor(now / 1000),
    cpuUsedPct: stats.cpuSeconds === null ? 0 : Math.round((stats.cpuSeconds / seconds) * 10_000) / 100,
    cpuCount: 0,
    memUsed: stats.memoryBytes ?? 0,
    memTotal: stats.memoryLimitBytes ?? 0,
    memCache: 0,
    diskUsed: stats.diskBytes ?? stats.workspaceBytes,
    diskTotal: stats.diskLimitBytes ?? 0,
  };
}
