import type { SandstreamClient } from '../client.js';
import { ExitCodes } from './exit-codes.js';
import { UsageError } from './flags.js';

/**
 * `sandstream sandbox set-timeout <id> <seconds>`: the sandbox now ends that many seconds from
 * now (E2B's setTimeout), capped at the operator's maximum lifetime; prints when it ends.
 */
export async function setSandboxTimeout(
  client: SandstreamClient,
  id: string,
  rawSeconds: string | undefined,
): Promise<number> {
  if (rawSeconds === undefined)
    throw new UsageError('sandbox set-timeout needs seconds: sandbox set-timeout <id> <seconds>');
  if (!/^\d+$/.test(rawSeconds))
    throw new UsageError(`sandbox set-timeout: seconds is a whole number (got "${rawSeconds}")`);
  const { endsAt, capped } = await client.sandboxes.handle(id).setTimeout(Number(rawSeconds));
  const note = capped ? " (capped at the operator's maximum lifetime)" : '';
  process.stdout.write(`${id} ends at ${new Date(endsAt).toISOString()}${note}\n`);
  return ExitCodes.succeeded;
}
