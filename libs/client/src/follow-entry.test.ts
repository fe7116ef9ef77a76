import { encodeEvent, SCHEMA_VERSION, type StepEvent } from '@sandstream/wire';
import { describe, expect, it } from 'vitest';
import { idBefore, resumePoint } from './follow-cursor.js';
import { decodeFollowEntries } from './follow-entry.js';

const line = (seq: number): StepEvent => ({
  schemaVersion: SCHEMA_VERSION,
  stepId: 's',
  kind: 'stdout',
  seq,
  line: String(seq),
  timestamp: '2026-11-27T00:00:00.000Z',
});

describe('an events entry the agent packed several lines into', () => {
  it('yields every line in order; the last has the entry id as its cursor, the others the id and their index', () => {
    const fields = [...encodeEvent(line(1)), ...encodeEvent(line(2)), ...encodeEvent(line(3))];
    const items = decodeFollowEntries('1700-5', fields);
    expect(items.map((i) => (i.type === 'output' ? [i.seq, i.line, i.cursor] : null))).toEqual([
      [1, '1', '1700-5:0'],
      [2, '2', '1700-5:1'],
      [3, '3', '1700-5'],
    ]);
    expect(decodeFollowEntries('9-0', encodeEvent(line(1)))).toMatchObject([{ cursor: '9-0' }]);
  });

  it('resumes inside an entry by reading it again and skipping the items seen', () => {
    expect(resumePoint('1700-5')).toEqual({ after: '1700-5' });
    expect(resumePoint('1700-5:1')).toEqual({ after: '1700-4', partial: { entry: '1700-5', skip: 2 } });
  });

  it('finds the id just before any id', () => {
    expect(idBefore('1700-5')).toBe('1700-4');
    expect(idBefore('1700-0')).toBe('1699-18446744073709551615');
    expect(idBefore('0-0')).toBe('0-0');
  });
});

describe('a progress job event', () => {
  const progress = {
    phase: 'image-pull',
    image: 'r:5000/x:1',
    layers: 2,
    layersDone: 1,
    downloadedBytes: 10,
    totalBytes: 20,
    done: false,
  };
  const event = (extra: Record<string, unknown>) => [
    'job',
    JSON.stringify({
      type: 'progress',
      jobId: 'j',
      tenant: 't',
      from: 'starting',
      to: 'starting',
      at: 1,
      reason: 'pulling',
      ...extra,
    }),
  ];

  it('is a progress item with its numbers and words, not a state change', () => {
    expect(decodeFollowEntries('5-0', event({ progress }))).toEqual([
      { type: 'progress', cursor: '5-0', progress, message: 'pulling' },
    ]);
  });

  it('without its progress it yields nothing (never a starting → starting state)', () => {
    expect(decodeFollowEntries('5-0', event({}))).toEqual([]);
  });
});
