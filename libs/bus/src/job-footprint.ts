import type { DispatchKeys } from './dispatch-keys.js';
import type { KeySpace } from './key-space.js';
import { sandboxFootprint } from './sandbox-footprint.js';

/**
 * Every key one job owns in its own slot (hash tag `{<jobId>}`), named from the key space: the one
 * list of it. The reaper deletes a finished job past retention as exactly these keys, in one
 * script (reaper-delete-finished-job), so a new per-job key is added here; that script's file
 * name counts the keys, and LuaScript refuses a call with another count.
 */
export interface JobFootprint {
  /** HASH: the job record. */
  readonly record: string;
  /** The JetStream log archive's marker for the job (KeySpace.jobLogArchive). */
  readonly logArchive: string;
  /**
   * All of them, the record first and the log-archive marker second (the script reads both),
   * then the dispatch state, the code-contexts hash, the sandbox's named keys and its preview
   * hash (sandboxFootprint).
   * The preview label's index entry lives in another slot: JobStore.delete frees it after.
   */
  readonly keys: readonly string[];
}

export function jobFootprint(keys: KeySpace, dispatchKeys: DispatchKeys, jobId: string): JobFootprint {
  const record = keys.job(jobId);
  const logArchive = keys.jobLogArchive(jobId);
  const footprint = sandboxFootprint(keys, jobId);
  return {
    record,
    logArchive,
    keys: [
      record,
      logArchive,
      dispatchKeys.dispatchState(jobId),
      keys.jobCodeContexts(jobId),
      ...footprint.named,
      ...footprint.preview,
    ],
  };
}
