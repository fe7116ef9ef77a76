import type { SandboxRecord } from '@sandstream/bus';
import { pollUntil } from '@sandstream/test-support';
import { describe, expect, it } from 'vitest';
import { PreviewConnections } from './preview-connections.js';

describe('PreviewConnections', () => {
  it("closes a sandbox's proxied connections once it is no longer ready, and only then", async () => {
    const states = new Map<string, SandboxRecord['state'] | 'unreadable'>([
      ['a', 'ready'],
      ['b', 'ready'],
    ]);
    const connections = new PreviewConnections(async (id) => {
      const state = states.get(id);
      if (state === 'unreadable') throw new Error('redis did not answer');
      return state ? ({ id, state } as SandboxRecord) : null;
    });
    const closed: string[] = [];
    connections.add('a', { close: () => closed.push('a1') });
    connections.add('a', { close: () => closed.push('a2') });
    const releaseB = connections.add('b', { close: () => closed.push('b') });
    states.set('b', 'unreadable');
    states.set('a', 'closing');
    await pollUntil('a closed', () => closed.length === 2);
    expect(closed.sort()).toEqual(['a1', 'a2']);
    // An unreadable record leaves its connections open; a released one is not closed later.
    releaseB();
    states.set('b', 'closed');
    await new Promise((r) => setTimeout(r, 1500));
    expect(closed).toHaveLength(2);
    connections.closeAll();
  });
});
