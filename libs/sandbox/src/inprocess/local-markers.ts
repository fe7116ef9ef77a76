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

/**
 * Every marker under `<root>/jobs/*` like readMarkers, but each directory's marker is read and
 * parsed once: a marker is written once, when its sandbox is created, into a directory whose name
 * (`<jobId>-<random>`) is never used again. A list() then costs one readdir instead of an open,
 * read, JSON and schema parse per sandbox on the host (what an idle pod-lifecycle spent most of
 * its CPU on: docs/benchmarks.md, issue 32). A directory whose marker could not be read yet (its
 * create still writing it) is read again next time.
 */
export class MarkerCache {
  private readonly byDir = new Map<string, InProcessRecord>();

  constructor(private readonly root: string) {}

  async read(): Promise<InProcessRecord[]> {
    const jobsDir = join(this.root, 'jobs');
    let names: string[];
    try {
      names = await readdir(jobsDir);
    } catch {
      this.byDir.clear();
      return [];
    }
    const present = new Set(names);
    for (const name of this.byDir.keys()) if (!present.has(name)) this.byDir.delete(name);
    const fresh = names.filter((name) => !this.byDir.has(name));
    const read = await Promise.all(fresh.map((name) => readMarkerIn(jobsDir, name)));
    for (const [i, record] of read.entries()) if (record) this.byDir.set(fresh[i] as string, record);
    return [...this.byDir.values()];
  }
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
  const records = await Promise.all(names.filter(match).map((name) => readMarkerIn(jobsDir, name)));
  return records.filter((r): r is InProcessRecord => r !== undefined);
}

/** One directory's marker; undefined when it is missing, unreadable or not a marker. */
async function readMarkerIn(jobsDir: string, name: string): Promise<InProcessRecord | undefined> {
  try {
    const parsed = InProcessRecordSchema.safeParse(
      JSON.parse(await readFile(join(jobsDir, name, MARKER_FILE), 'utf8')),
    );
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}
