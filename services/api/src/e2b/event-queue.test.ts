import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { EventQueue } from './event-queue.js';

async function drain<T>(queue: EventQueue<T>): Promise<{ items: T[]; error?: unknown }> {
  const items: T[] = [];
  try {
    for await (const item of queue) items.push(item);
  } catch (error) {
    return { items, error };
  }
  return { items };
}

describe('EventQueue', () => {
  it('keeps the order pushed, a slow promise included (output never passes its start event)', async () => {
    const queue = new EventQueue<string>();
    const reading = drain(queue);
    queue.push(sleep(30).then(() => 'start'));
    queue.push('out 1');
    await sleep(5);
    queue.push('out 2');
    queue.end();
    queue.push('after the end');
    expect(await reading).toEqual({ items: ['start', 'out 1', 'out 2'] });
  });

  it('ends with the error after what was pushed; a rejected message ends it at its turn', async () => {
    const failing = new EventQueue<string>();
    failing.push('a');
    failing.end(new Error('the sandbox went away'));
    const failed = await drain(failing);
    expect(failed.items).toEqual(['a']);
    expect((failed.error as Error).message).toBe('the sandbox went away');

    const rejecting = new EventQueue<string>();
    rejecting.push('a');
    rejecting.push(Promise.reject(new Error('no pid')));
    rejecting.push('c');
    const rejected = await drain(rejecting);
    expect(rejected.items).toEqual(['a']);
    expect((rejected.error as Error).message).toBe('no pid');
  });

  it('says it is alive while quiet, and stops once ended', async () => {
    const queue = new EventQueue<string>({ keepalive: { everyMs: 10, message: () => 'keepalive' } });
    const reading = drain(queue);
    await sleep(55);
    queue.push('done');
    queue.end();
    const { items } = await reading;
    expect(items.filter((i) => i === 'keepalive').length).toBeGreaterThanOrEqual(3);
    expect(items.at(-1)).toBe('done');
    const count = items.length;
    await sleep(30);
    expect(items.length).toBe(count);
  });
});
