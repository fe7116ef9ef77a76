import { CodeErrorSchema, CodeResultSchema } from '@sandstream/wire';
import { describe, expect, it } from 'vitest';
import * as z from 'zod';
import { parseRunnerMessage } from './runner-message.js';

/** The schema the hand-written check replaced: both must agree on every line. */
const RunnerMessageSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('ready'), pid: z.number().int() }),
  z.object({
    type: z.literal('stream'),
    id: z.number().int().nullable(),
    name: z.enum(['stdout', 'stderr']),
    text: z.string(),
  }),
  CodeResultSchema.extend({ type: z.literal('result'), id: z.number().int().nullable() }),
  z.object({ type: z.literal('done'), id: z.number().int().nullable(), error: CodeErrorSchema.nullable() }),
]);

const MESSAGES: Record<string, unknown>[] = [
  { type: 'ready', pid: 12 },
  { type: 'stream', id: 1, name: 'stdout', text: 'hi\n' },
  { type: 'stream', id: null, name: 'stderr', text: '' },
  { type: 'result', id: 2, text: '3', html: '<b>3</b>', json: { a: 1 }, isMainResult: true, extra: 1 },
  { type: 'result', id: null, png: 'iVBOR', isMainResult: false },
  { type: 'done', id: 2, error: null },
  { type: 'done', id: 3, error: { name: 'ValueError', value: 'bad', traceback: 'tb' } },
];
const ODD: unknown[] = [undefined, null, '', 'x', 1, 1.5, -1, true, [], {}, 'stdout', 'ready'];

describe('parseRunnerMessage', () => {
  it('reads each message as the schema did, and refuses what it refused', () => {
    const lines: unknown[] = ['not json', '[]', 'null', '{"type":"other"}'];
    for (const message of MESSAGES) {
      lines.push(message);
      for (const key of [...Object.keys(message), 'id', 'error', 'text']) {
        for (const value of ODD) {
          const variant: Record<string, unknown> = { ...message, [key]: value };
          if (value === undefined) delete variant[key];
          lines.push(variant);
        }
      }
    }
    let accepted = 0;
    for (const line of lines) {
      const text = typeof line === 'string' ? line : JSON.stringify(line);
      let expected: unknown;
      try {
        const parsed = RunnerMessageSchema.safeParse(JSON.parse(text));
        expected = parsed.success ? parsed.data : undefined;
      } catch {
        expected = undefined;
      }
      const got = parseRunnerMessage(text);
      expect({ text, got }).toStrictEqual({ text, got: expected });
      if (got) accepted++;
    }
    expect(accepted).toBeGreaterThan(MESSAGES.length);
  });
});
