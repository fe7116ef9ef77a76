import { describe, expect, it } from 'vitest';
import { type JobGlance, sandboxVerdict } from './job-glance.js';

const NOW = 1_000_000_000;
const GRACE = 120_000;
const glance = (state: string | null, finishedAt?: number, namespace: string | null = 'ns'): JobGlance => ({
  state,
  finishedAt,
  updatedAt: finishedAt ?? NOW - 5000,
  namespace,
  pausedFiles: false,
});

describe('sandboxVerdict', () => {
  it('keeps a running job and one that ended within the grace; orphans only our ended ones; the rest get the full look', () => {
    expect(sandboxVerdict(glance('running'), 'ns', NOW, GRACE)).toBe('kept');
    expect(sandboxVerdict(glance('starting'), 'ns', NOW, GRACE)).toBe('kept');
    expect(sandboxVerdict(glance('paused'), 'ns', NOW, GRACE)).toBe('kept');
    expect(sandboxVerdict(glance('running', undefined, 'other'), 'ns', NOW, GRACE)).toBe('kept');
    expect(sandboxVerdict(glance('succeeded', NOW - GRACE + 1000), 'ns', NOW, GRACE)).toBe('kept');
    // Ended past the grace: this namespace's is an orphan.
    expect(sandboxVerdict(glance('failed', NOW - GRACE - 1000), 'ns', NOW, GRACE)).toBe('orphan');
    expect(sandboxVerdict(glance('cancelled', NOW - 1), 'ns', NOW, 0)).toBe('orphan');
    // Another namespace's, or one whose record predates the field: the full look decides.
    expect(sandboxVerdict(glance('failed', NOW - GRACE - 1000, 'other'), 'ns', NOW, GRACE)).toBe('look');
    expect(sandboxVerdict(glance('failed', NOW - GRACE - 1000, null), 'ns', NOW, GRACE)).toBe('look');
    // No record: a vanished job or a pool member.
    expect(sandboxVerdict(glance(null), 'ns', NOW, GRACE)).toBe('look');
  });
});
