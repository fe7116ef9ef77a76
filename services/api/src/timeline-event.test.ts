import type { FollowItem } from '@sandstream/client';
import { describe, expect, it } from 'vitest';
import { sseEvent } from './sse.js';
import { timelineEvent } from './timeline-event.js';

const general = (item: FollowItem) => sseEvent(item.type, item, item.cursor);

describe('timelineEvent', () => {
  it('writes an output line byte for byte as JSON.stringify does, escapes included', () => {
    for (const line of ['plain', '', 'quote " backslash \\ tab \t', 'ünïcode ✓ \u2028', '\u0000\u001f']) {
      const item: FollowItem = {
        type: 'output',
        cursor: '1764000000000-42',
        stepId: 'step "one"',
        stream: 'stderr',
        line,
        seq: 42,
      };
      expect(timelineEvent(item)).toBe(general(item));
    }
  });

  it('writes every other item, and an output item with extra fields, the general way', () => {
    const state: FollowItem = { type: 'state', cursor: '1-0', from: null, to: 'succeeded', terminal: true };
    expect(timelineEvent(state)).toBe(general(state));
    const wider = {
      type: 'output',
      cursor: '1-1',
      stepId: 's',
      stream: 'stdout',
      line: 'x',
      seq: 1,
      extra: true,
    };
    expect(JSON.parse(timelineEvent(wider as FollowItem).split('data: ')[1] as string)).toEqual(wider);
  });
});
