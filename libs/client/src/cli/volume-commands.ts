import type { VolumeMount } from '@sandstream/bus';
import type { SandstreamClient } from '../client.js';
import { ExitCodes } from './exit-codes.js';
import { type ParsedCommandLine, UsageError } from './flags.js';

// `sandstream volume create|ls|rm` and `sandbox create --volume <name>:<path>[:ro]`.

type Values = ParsedCommandLine['values'];

/** `--volume <name>:<path>[:ro]`, repeatable: the spec's `volumes` (checked again by the SDK). */
export function volumeMounts(
  entries: readonly string[] | undefined,
): Pick<VolumeMount, 'name' | 'mountPath' | 'readOnly'>[] {
  return (entries ?? []).map((entry) => {
    const parts = entry.split(':');
    const readOnly = parts.length === 3 && parts[2] === 'ro';
    if (parts.length < 2 || parts.length > 3 || (parts.length === 3 && !readOnly) || !parts[0] || !parts[1]) {
      throw new UsageError(`--volume takes <name>:<path>[:ro] (got "${entry}")`);
    }
    return { name: parts[0], mountPath: parts[1], readOnly };
  });
}

/** Bytes as the flag gives them: a plain number, or with Ki/Mi/Gi/Ti. */
export function sizeBytes(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const match = /^(\d+)(Ki|Mi|Gi|Ti)?$/.exec(value);
  if (!match) throw new UsageError(`--size takes bytes, or a number with Ki, Mi, Gi or Ti (got "${value}")`);
  const unit = { Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, Ti: 1024 ** 4 }[match[2] ?? ''] ?? 1;
  return Number(match[1]) * unit;
}

export async function volumeCommand(
  client: SandstreamClient,
  command: 'volume create' | 'volume ls' | 'volume rm',
  name: string | undefined,
  values: Values,
): Promise<number> {
  const volumes = values.tenant ? client.volumes.forTenant(values.tenant) : client.volumes;
  if (command === 'volume ls') {
    const all = await volumes.list();
    if (values.json) process.stdout.write(`${JSON.stringify(all, null, 2)}\n`);
    else {
      for (const v of all) {
        const size = v.sizeLimitBytes === undefined ? '-' : String(v.sizeLimitBytes);
        const users = v.holders.map((h) => `${h.sandboxId}${h.readOnly ? ' (ro)' : ''}`).join(', ');
        process.stdout.write(`${v.name.padEnd(40)} ${size.padEnd(14)} ${v.createdAt}  ${users}\n`);
      }
    }
    return ExitCodes.succeeded;
  }
  if (!name) throw new UsageError(`${command} needs a volume name`);
  if (command === 'volume rm') {
    await volumes.delete(name);
    return ExitCodes.succeeded;
  }
  const limit = sizeBytes(values.size);
  const volume = await volumes.create({ name, ...(limit !== undefined ? { sizeLimitBytes: limit } : {}) });
  process.stdout.write(`${volume.name}\n`);
  return ExitCodes.succeeded;
}
