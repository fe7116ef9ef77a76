import type { SandstreamClient } from '../client.js';
import { ExitCodes } from './exit-codes.js';
import { type ParsedCommandLine, UsageError } from './flags.js';

/**
 * `sandstream sandbox url <id> <port> [--public] [--host]`: the preview URL alone on stdout, so
 * that `open "$(sandstream sandbox url $ID 3000)"` works; a private one carries its token.
 */
export async function printPortUrl(
  client: SandstreamClient,
  id: string,
  rawPort: string | undefined,
  values: ParsedCommandLine['values'],
): Promise<number> {
  if (rawPort === undefined) throw new UsageError('sandbox url needs a port: sandbox url <id> <port>');
  const port = Number(rawPort);
  if (!/^\d{1,5}$/.test(rawPort) || port < 1 || port > 65535)
    throw new UsageError(`sandbox url: the port is 1..65535 (got "${rawPort}")`);
  const url = await client.sandboxes.handle(id).ports.url(port, {
    public: values.public === true,
    form: values.host ? 'host' : 'path',
  });
  process.stdout.write(`${url}\n`);
  return ExitCodes.succeeded;
}
