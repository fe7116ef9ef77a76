import { describe, expect, it } from 'vitest';
import { type JobGlance, sandboxIsNoOrphan } from './job-glance.js';

const NOW = 1_000_000_000;
const GRACE = 120_000;
const glance = (state: string | null, finishedAt?: number): JobGlance => ({
  state,
  finishedAt,
  updatedAt: finishedAt ?? NOW - 5000,
  namespace: 'ns',
  pausedFiles: false,
});

describe('sandboxIsNoOrphan', () => {
  it('settles a running job and one that ended within the grace; leaves the rest to the full look', () => {
    expect(sandboxIsNoOrphan(glance('running'), NOW, GRACE)).toBe(true);
    expect(sandboxIsNoOrphan(glance('starting'), NOW, GRACE)).toBe(true);
    expect(sandboxIsNoOrphan(glance('paused'), NOW, GRACE)).toBe(true);
    expect(sandboxIsNoOrphan(glance('succeeded', NOW - GRACE + 1000), NOW, GRACE)).toBe(true);
    // Ended past the grace: maybe an orphan.
    expect(sandboxIsNoOrphan(glance('failed', NOW - GRACE - 1000), NOW, GRACE)).toBe(false);
    expect(sandboxIsNoOrphan(glance('cancelled', NOW - GRACE - 1000), NOW, 0)).toBe(false);
    // No record: a vanished job or a pool member.
    expect(sandboxIsNoOrphan(glance(null), NOW, GRACE)).toBe(false);
  });
});
