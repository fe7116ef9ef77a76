import { PAUSED_OBJECT_PREFIX, type SnapshotRecords, type SnapshotStore } from '@sandstream/bus';
import type { Logger } from '@sandstream/telemetry';

export interface SnapshotReaperReport {
  expired: number;
  orphanObjects: number;
  orphanChunks: number;
}

/**
 * Snapshot cleanup, once per reaper pass: records past their retention (and uploads past their
 * grace: a capture whose pod-lifecycle died) with their stored bytes; stored objects no record
 * names (deleted with `snapshot rm`, or committed by nobody); chunk groups no object names (an
 * upload killed mid-way), once they have stayed so, without growing, for the upload grace. Safe beside another
 * reaper: every step is idempotent.
 */
export class SnapshotReaper {
  /**
   * Unreferenced chunk groups by when this process last saw them grow (first saw them, for one
   * that never grew) and how many chunks they held then.
   */
  private readonly chunksSeen = new Map<string, { since: number; chunks: number }>();
  /** Paused objects no record names, by when this process first saw them so. */
  private readonly pausedOrphansSeen = new Map<string, number>();

  constructor(
    private readonly options: {
      records: SnapshotRecords;
      objects: SnapshotStore;
      uploadGraceMs: number;
      /**
       * A paused sandbox's files (`pause-…` objects) have no snapshot record: kept while their
       * sandbox's record names them (pausedObjectKept), else orphans after the upload grace.
       */
      isPausedObjectKept?: (name: string) => Promise<boolean>;
      /** Called after an orphaned `pause-…` object went: what it held of its tenant's quota goes back. */
      onPausedOrphanDeleted?: (name: string) => Promise<void>;
      logger: Logger;
      now?: () => number;
    },
  ) {}

  async runOnce(): Promise<SnapshotReaperReport> {
    const { records, objects } = this.options;
    const now = this.options.now?.() ?? Date.now();
    const report: SnapshotReaperReport = { expired: 0, orphanObjects: 0, orphanChunks: 0 };
    for (;;) {
      const due = await records.expired(now, 100);
      if (due.length === 0) break;
      for (const { tenant, snapshotId } of due) {
        // Bytes first: a crash between the two leaves a record the next pass finds again.
        await objects.delete(snapshotId);
        await records.purge(tenant, snapshotId);
        report.expired++;
      }
    }
    const pausedSeen = new Set<string>();
    for (const name of await objects.names()) {
      if (await records.read(name)) continue;
      if (name.startsWith(PAUSED_OBJECT_PREFIX)) {
        if (await this.options.isPausedObjectKept?.(name)) continue;
        // A keep still uploading has no reference yet: an orphan only once past the grace.
        pausedSeen.add(name);
        const first = this.pausedOrphansSeen.get(name);
        if (first === undefined || now - first < this.options.uploadGraceMs) {
          if (first === undefined) this.pausedOrphansSeen.set(name, now);
          continue;
        }
        this.pausedOrphansSeen.delete(name);
      }
      await objects.delete(name);
      if (name.startsWith(PAUSED_OBJECT_PREFIX)) await this.options.onPausedOrphanDeleted?.(name);
      report.orphanObjects++;
    }
    for (const name of this.pausedOrphansSeen.keys())
      if (!pausedSeen.has(name)) this.pausedOrphansSeen.delete(name);
    // The grace runs from a group's last growth, not from its first sighting: an upload slower
    // than the grace is still adding chunks and must not be cut (its object would read as corrupt).
    const unreferenced = await objects.unreferencedChunks();
    const present = new Set(unreferenced.map((g) => g.nuid));
    for (const nuid of this.chunksSeen.keys()) if (!present.has(nuid)) this.chunksSeen.delete(nuid);
    for (const { nuid, chunks } of unreferenced) {
      const seen = this.chunksSeen.get(nuid);
      if (seen === undefined || seen.chunks !== chunks) this.chunksSeen.set(nuid, { since: now, chunks });
      else if (now - seen.since >= this.options.uploadGraceMs) {
        await objects.purgeChunks(nuid);
        this.chunksSeen.delete(nuid);
        report.orphanChunks++;
      }
    }
    if (report.expired + report.orphanObjects + report.orphanChunks > 0)
      this.options.logger.info(report, 'snapshots reaped');
    return report;
  }
}
