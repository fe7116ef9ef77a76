import { describeEgress, type NetworkPolicy, NetworkPolicySchema } from '@sandstream/wire';
import type { SandstreamClient } from '../client.js';
import { ExitCodes } from './exit-codes.js';
import { type ParsedCommandLine, UsageError } from './flags.js';

/**
 * The policy `sandbox network <id> --allow <x>… | --none | --internet` asks for: exactly one
 * form; `--allow` repeats or takes a comma-separated list. Checked before connecting anywhere.
 */
export function networkPolicyOf(values: ParsedCommandLine['values']): NetworkPolicy {
  const allow = (values.allow ?? []).flatMap((v) => v.split(',')).map((v) => v.trim());
  const forms = [allow.length > 0, values.none === true, values.internet === true].filter(Boolean).length;
  if (forms !== 1)
    throw new UsageError(
      'sandbox network needs exactly one of --allow <cidr|host:port|domain>…, --none, --internet',
    );
  const egress = values.none ? 'none' : values.internet ? 'internet' : { allow };
  const parsed = NetworkPolicySchema.safeParse({ egress });
  if (!parsed.success)
    throw new UsageError(`sandbox network: ${parsed.error.issues.map((i) => i.message).join('; ')}`);
  return parsed.data;
}

/** Applies it to the running sandbox and prints the policy applied (`internet`, `none`, `allow [a, b]`). */
export async function updateSandboxNetwork(
  client: SandstreamClient,
  id: string,
  values: ParsedCommandLine['values'],
): Promise<number> {
  const applied = await client.sandboxes.handle(id).network.update(networkPolicyOf(values));
  process.stdout.write(`${describeEgress(applied.egress)}\n`);
  return ExitCodes.succeeded;
}
