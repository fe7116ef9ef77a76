import { SandboxLabels } from '@sandstream/sandbox';
import { describe, expect, it } from 'vitest';
import { mayBeOurs } from './sandbox-ownership.js';

const names = () => ['here', 'derived'];
const ids = new Set(['r-aaaaaaaaaaaa', 'r-bbbbbbbbbbbb']);
const labels = (installation?: string, id?: string): Record<string, string> => ({
  ...(installation !== undefined ? { [SandboxLabels.installation]: installation } : {}),
  ...(id !== undefined ? { [SandboxLabels.installationId]: id } : {}),
});

describe('mayBeOurs (what the reaper lets its in-process list() report)', () => {
  it('keeps what the sandbox pass judges or counts: one of our ids, or one of our names', () => {
    expect(mayBeOurs(labels('renamed', 'r-bbbbbbbbbbbb'), names, ids)).toBe(true);
    expect(mayBeOurs(labels('derived'), names, ids)).toBe(true);
    // Our name, another Redis's id: counted as foreign by the pass, so listed.
    expect(mayBeOurs(labels('here', 'r-000000000000'), names, ids)).toBe(true);
  });

  it("leaves out other installations' sandboxes and unlabelled ones", () => {
    expect(mayBeOurs(labels('elsewhere', 'r-000000000000'), names, ids)).toBe(false);
    expect(mayBeOurs(labels('elsewhere'), names, ids)).toBe(false);
    expect(mayBeOurs(labels(), names, ids)).toBe(false);
  });

  it('leaves nothing out before the ids were first read (names are not known yet either)', () => {
    const unread = () => {
      throw new Error('refresh() before reading the id');
    };
    expect(mayBeOurs(labels('elsewhere'), unread, undefined)).toBe(true);
  });
});
