import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type InProcessRecord, InProcessRecordSchema } from './sandbox-registry.js';

/** Written into each sandbox's state directory beside the agent log. */
export const MARKER_FILE = 'sandbox.json';

/**
 * The in-process sandbox's record, also kept on the local disk beside the sandbox. The Redis
 * registry is what other replicas read; this copy is what survives when Redis does not (a
 * restart without data): list() still finds the agent, its labels (installation, job id) and its
 * directories, so the reaper can destroy the orphan instead of leaking the process and the files.
 */
export async function writeMarker(record: InProcessRecord): Promise<void> {
  await writeFile(join(record.stateDir, MARKER_FILE), JSON.stringify(record), { mode: 0o600 });
}

/** Every marker under `<root>/jobs/*`; unreadable or foreign files are skipped. */
export async function readMarkers(root: string): Promise<InProcessRecord[]> {
  return readMarkersMatching(root, () => true);
}

/** The marker of one job (its state directory is named `<jobId>-<random>`). */
export async function findMarker(root: string, jobId: string): Promise<InProcessRecord | undefined> {
  const found = await readMarkersMatching(root, (name) => name.startsWith(`${jobId}-`));
  return found.find((r) => r.jobId === jobId);
}

async function readMarkersMatching(
  root: string,
  match: (dirName: string) => boolean,
): Promise<InProcessRecord[]> {
  const jobsDir = join(root, 'jobs');
  let names: string[];
  try {
    names = await readdir(jobsDir);
  } catch {
    return [];
  }
  const records = await Promise.all(
    names.filter(match).map(async (name) => {
      try {
        const parsed = InProcessRecordSchema.safeParse(
          JSON.parse(await readFile(join(jobsDir, name, MARKER_FILE), 'utf8')),
        );
        return parsed.success ? parsed.data : undefined;
      } catch {
        return undefined;
      }
    }),
  );
  return records.filter((r): r is InProcessRecord => r !== undefined);
}
