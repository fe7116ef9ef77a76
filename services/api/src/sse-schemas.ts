import { CreateProgressSchema, JobStateSchema } from '@sandstream/bus';
import { ExecutionSchema } from '@sandstream/client';
import { CodeResultSchema } from '@sandstream/wire';
import { z } from 'zod';
import { ProblemSchema } from './problem.js';
import { ExecResultResponse } from './schemas.js';

/**
 * The server-sent events of the API's streams, for the OpenAPI document: each event of a
 * `text/event-stream` response as an object of its SSE fields (`event`, `id`, and `data`, the
 * JSON of the data line). They describe what sse.ts writes; nothing validates a stream with them.
 */
const event = <Name extends string, Data extends z.ZodType>(name: Name, data: Data, id = false) =>
  z.object({
    event: z.literal(name),
    ...(id
      ? { id: z.string().describe('stream entry id: send it back as Last-Event-ID to resume after it') }
      : {}),
    data,
  });

/** A stream that failed after it began ends with this event (problem details, as an error reply). */
const ErrorEvent = event('error', ProblemSchema);

const OutputLine = (stream: 'stdout' | 'stderr') =>
  event(stream, z.object({ stream: z.literal(stream), line: z.string(), seq: z.number().int() }));

/** One command's events: exec with Accept: text/event-stream, a background process's output. */
export const CommandEventSchema = z
  .discriminatedUnion('event', [
    event('started', z.object({ commandId: z.string() })).describe('exec only: the command id, first'),
    OutputLine('stdout'),
    OutputLine('stderr'),
    event(
      'gap',
      z.object({ stream: z.literal('gap'), from: z.number().int(), to: z.number().int() }),
    ).describe('lines from..to-1 (seq) are not in the stream (trimmed or dropped)'),
    event('result', ExecResultResponse).describe('the end: the command result'),
    ErrorEvent,
  ])
  .meta({ id: 'CommandEvent' });

/** A code cell's events (POST …/code with Accept: text/event-stream). */
export const CodeEventSchema = z
  .discriminatedUnion('event', [
    event('started', z.object({ commandId: z.string() })).describe("the cell's command id, first"),
    event('stdout', z.object({ line: z.string() })),
    event('stderr', z.object({ line: z.string() })),
    event('result', CodeResultSchema).describe(
      'a rich result (plot, table, the main result), once the cell ended',
    ),
    event('execution', ExecutionSchema).describe('the end: the whole execution'),
    ErrorEvent,
  ])
  .meta({ id: 'CodeEvent' });

const cursor = z.string().describe('the stream entry id (also the event id)');

/** A job's or sandbox's timeline (FollowItem of the SDK), each event named by its item type. */
export const TimelineEventSchema = z
  .discriminatedUnion('event', [
    event(
      'state',
      z.object({
        type: z.literal('state'),
        cursor,
        from: JobStateSchema.nullable(),
        to: JobStateSchema,
        reason: z.string().optional(),
        terminal: z.boolean(),
      }),
      true,
    ),
    event(
      'cancel-requested',
      z.object({ type: z.literal('cancel-requested'), cursor, reason: z.string().optional() }),
      true,
    ),
    event(
      'progress',
      z.object({ type: z.literal('progress'), cursor, progress: CreateProgressSchema, message: z.string() }),
      true,
    ).describe('a long create phase advancing while the sandbox starts (its image being pulled)'),
    event('step-started', z.object({ type: z.literal('step-started'), cursor, stepId: z.string() }), true),
    event(
      'output',
      z.object({
        type: z.literal('output'),
        cursor,
        stepId: z.string(),
        stream: z.enum(['stdout', 'stderr']),
        line: z.string(),
        seq: z.number().int(),
      }),
      true,
    ),
    event(
      'gap',
      z.object({
        type: z.literal('gap'),
        cursor,
        stepId: z.string(),
        from: z.number().int(),
        to: z.number().int(),
        startTrimmed: z.boolean().optional(),
      }),
      true,
    ),
    event(
      'step-completed',
      z.object({
        type: z.literal('step-completed'),
        cursor,
        stepId: z.string(),
        exitCode: z.number().int().nullable(),
        droppedLines: z.number().int(),
        seq: z.number().int().describe("one past the step's last line"),
      }),
      true,
    ),
    event('end', z.object({})).describe('with ?follow=false: the stream ended because it was asked to'),
    ErrorEvent,
  ])
  .meta({ id: 'TimelineEvent' });

/**
 * A 200 answered as `text/event-stream`, each event one of `events`: the route's response entry
 * (fastify-type-provider-zod turns the content form into the OpenAPI media type).
 */
export function eventStreamResponse(description: string, events: z.ZodType) {
  return { description, content: { 'text/event-stream': { schema: events } } };
}
