import { readFileSync } from 'node:fs';

/** The carrier's tag before carriers were tagged by content; what a checkout without a record uses. */
export const DEFAULT_CARRIER_IMAGE = 'sandstream/agent-carrier:dev';

/**
 * The agent carrier this checkout built: scripts/images/agent-carrier.sh tags it by the content
 * of the agent files (`sandstream/agent-carrier:<hash12>`) and records the tag in
 * agent/dist/carrier-image, so checkouts sharing one engine each use their own carrier. Without
 * that record (a services image, a checkout whose images are not built): DEFAULT_CARRIER_IMAGE.
 * SANDSTREAM_AGENT_CARRIER_IMAGE, where given, wins over both (backend-env.ts).
 */
export function localCarrierImage(
  recordFile: URL = new URL('../../../../agent/dist/carrier-image', import.meta.url),
): string {
  try {
    const tag = readFileSync(recordFile, 'utf8').trim();
    return /^[\w./:-]+$/.test(tag) ? tag : DEFAULT_CARRIER_IMAGE;
  } catch {
    return DEFAULT_CARRIER_IMAGE;
  }
}
