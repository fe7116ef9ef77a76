import { SandboxLabels } from '@sandstream/sandbox';

/**
 * Whether a sandbox's labels may make it this installation's, before anything else about it is
 * read: it carries one of this Redis's installation ids, or one of this installation's names
 * (made before the ids, or another Redis's sandbox under our name, which the reaper counts as
 * foreign). Every other sandbox is skipped by the reaper's sandbox pass without a word, so the
 * backend's list() may leave it out (the in-process marker folder is shared by every installation
 * on the machine; reading and probing theirs was most of an idle pass). Before the ids were first
 * read (`ids` undefined), nothing is left out.
 */
export function mayBeOurs(
  labels: Readonly<Record<string, string>>,
  names: () => readonly string[],
  ids: ReadonlySet<string> | undefined,
): boolean {
  if (ids === undefined) return true;
  const id = labels[SandboxLabels.installationId];
  if (id !== undefined && ids.has(id)) return true;
  return names().includes(labels[SandboxLabels.installation] ?? '');
}
