import type { SandstreamClient } from '../client.js';
import type { SnapshotInfo } from '../snapshots.js';
import { ExitCodes } from './exit-codes.js';
import { type ParsedCommandLine, UsageError } from './flags.js';

// `sandstream snapshot create|ls|rm`, `sandbox restore|fork`: snapshots from the shell. Their
// output forms are contracts: `snapshot create` prints the id alone, `sandbox fork` one id a line.

type Values = ParsedCommandLine['values'];

export async function createSnapshot(
  client: SandstreamClient,
  sandboxId: string,
  values: Values,
): Promise<number> {
  const taken = await client.sandboxes.handle(sandboxId).snapshot(values.name ? { name: values.name } : {});
  process.stdout.write(`${taken.snapshotId}\n`);
  return ExitCodes.succeeded;
}

export function formatSnapshotRow(s: SnapshotInfo): string {
  return `${s.snapshotId.padEnd(26)} ${s.fromSandbox.padEnd(32)} ${String(s.sizeBytes).padStart(12)} ${new Date(s.createdAt).toISOString()}  ${s.name ?? ''}`;
}

export async function listSnapshots(client: SandstreamClient, values: Values): Promise<number> {
  const all = await client.snapshots.list();
  if (values.json) process.stdout.write(`${JSON.stringify(all, null, 2)}\n`);
  else for (const s of all) process.stdout.write(`${formatSnapshotRow(s)}\n`);
  return ExitCodes.succeeded;
}

export async function removeSnapshot(client: SandstreamClient, snapshotId: string): Promise<number> {
  await client.snapshots.delete(snapshotId);
  return ExitCodes.succeeded;
}

export async function restoreSandbox(
  client: SandstreamClient,
  sandboxId: string,
  snapshotId: string | undefined,
): Promise<number> {
  if (!snapshotId) throw new UsageError('sandbox restore needs a sandbox id and a snapshot id');
  const done = await client.sandboxes.handle(sandboxId).restore(snapshotId);
  for (const command of done.stoppedCommands)
    process.stderr.write(`sandstream: stopped running command ${command} before the restore\n`);
  return ExitCodes.succeeded;
}

/** `--count` as a whole number 1 … 100. */
export function forkCount(value: string | undefined): number {
  const count = Number(value ?? '1');
  if (!Number.isInteger(count) || count < 1 || count > 100)
    throw new UsageError(`--count takes a whole number from 1 to 100 (got "${value}")`);
  return count;
}

export async function forkSandbox(
  client: SandstreamClient,
  sandboxId: string,
  values: Values,
): Promise<number> {
  const forks = await client.sandboxes.handle(sandboxId).fork({ count: forkCount(values.count) });
  for (const fork of forks) process.stdout.write(`${fork.id}\n`);
  return ExitCodes.succeeded;
}
