import { isSea } from 'node:sea';
import { isRegularFile } from '../inject.js';
import type { Logger } from '../logger.js';
import { currentSearchFacts, runtimeFileCandidates, type SpawnerSearchFacts } from './locate-spawner.js';

/** The native module (agent/native/sea-blob-release.c) in the runtime's lib directory. */
export const SEA_RELEASE_NAME = 'sandstream-sea-release.node';

let released = false;

/**
 * The single executable's startup blob (its V8 snapshot, ~7 MB) is read once while Node starts
 * and stays mapped for the process's life; loading sandstream-sea-release.node gives those pages
 * back (see its source for why that is safe). Called once the first heartbeat is out, so the
 * boot does not pay for it. Never fails the agent: without the module (an older runtime, plain
 * `node`), or if it will not load, the pages just stay mapped.
 */
export function releaseStartupBlob(log: Logger, facts: SpawnerSearchFacts = currentSearchFacts()): void {
  if (released || !isSea()) return;
  released = true;
  const path = runtimeFileCandidates(facts, SEA_RELEASE_NAME).find(isRegularFile);
  if (!path) {
    log.debug('startup blob kept mapped', { reason: `no ${SEA_RELEASE_NAME} beside the runtime` });
    return;
  }
  try {
    process.dlopen({ exports: {} }, path);
    log.debug('startup blob released', { path });
  } catch (err) {
    log.warn('startup blob kept mapped: the release module did not load', {
      path,
      error: (err as Error).message,
    });
  }
}
