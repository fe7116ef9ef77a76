import { describe, expect, it } from 'vitest';
import { warmUpFirstHeartbeat, warmUpValidation } from './snapshot-warm-up.js';

/** Sockets, servers and timers this process holds (what a startup snapshot must not contain). */
const openHandles = () =>
  process.getActiveResourcesInfo().filter((kind) => /TCP|Pipe|Timeout|Immediate/.test(kind));

describe('snapshot warm-up', () => {
  it('validates its samples without throwing', () => {
    expect(() => warmUpValidation()).not.toThrow();
  });

  it('writes its SET over a real loopback socket and leaves no socket, server or timer open', async () => {
    const before = openHandles();
    await warmUpFirstHeartbeat();
    // A closed handle leaves the list once libuv has run its close callback: a few loop turns.
    for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve));
    expect(openHandles()).toEqual(before);
  });
});
