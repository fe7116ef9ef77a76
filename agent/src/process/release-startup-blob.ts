import { isSea } from 'node:sea';
import { isRegularFile } from '../inject.js';
import type { Logger } from '../logger.js';
import { currentSearchFacts, runtimeFileCandidates, type SpawnerSearchFacts } from './locate-spawner.js';

/** The native module (agent/native/sea-blob-release.c) in the runtime's lib directory. */
export const SEA_RELEASE_NAME = 'sandstream-sea-release.node';
/** The addon that moves the bundle's source out of the V8 heap (agent/native/source-release.cc). */
export const SOURCE_RELEASE_NAME = 'sandstream-source-release.node';
/** Where the snapshot's loader keeps the string V8 compiled the bundle from (build-sea.mjs). */
const SOURCE_KEY = Symbol.for('sandstream.agent.source');

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
  releaseBundleSource(log, facts);
}

/**
 * The bundle's source (~640 KB) is a string in the snapshot's heap, so anonymous memory of every
 * agent, while the executable holds the same bytes: the addon makes the string read them from
 * there (see its source). Without the addon, or a build whose loader did not keep the string,
 * nothing changes.
 */
function releaseBundleSource(log: Logger, facts: SpawnerSearchFacts): void {
  const source: unknown = Reflect.get(globalThis, SOURCE_KEY);
  if (typeof source !== 'string') return;
  // Only the addon needs it from here on; the string itself stays V8's script source.
  Reflect.deleteProperty(globalThis, SOURCE_KEY);
  const path = runtimeFileCandidates(facts, SOURCE_RELEASE_NAME).find(isRegularFile);
  if (!path) {
    log.debug('bundle source kept in the heap', { reason: `no ${SOURCE_RELEASE_NAME} beside the runtime` });
    return;
  }
  try {
    const addon: { exports: { externalize?: (source: string) => boolean } } = { exports: {} };
    process.dlopen(addon, path);
    const moved = addon.exports.externalize?.(source) === true;
    log.debug(moved ? 'bundle source read from the executable' : 'bundle source kept in the heap', { path });
  } catch (err) {
    log.warn('bundle source kept in the heap: the addon did not load', {
      path,
      error: (err as Error).message,
    });
  }
}
