import { type ExecResult, execItemOf } from '../command-output.js';
import type { RunCommandOptions } from '../command-runner.js';
import { errorOfProblem, ProblemBodySchema, type ProblemSubject } from './problem-errors.js';
import type { ServerSentEvent } from './sse-parser.js';

/**
 * A command's event stream as the API sends it for exec and for a process's output: `started`
 * (its id), `stdout` / `stderr` lines, `gap`s, then its `result` (or an `error` problem). Each
 * is handed to the caller's callbacks as the Redis follower hands them (made a line by
 * execItemOf, as the Redis follower's are).
 */
export async function followCommandEvents(
  events: AsyncIterable<ServerSentEvent>,
  options: RunCommandOptions,
  subject: ProblemSubject,
): Promise<ExecResult> {
  for await (const event of events) {
    const data = JSON.parse(event.data) as Record<string, unknown>;
    switch (event.event) {
      case 'started':
        options.onStart?.(String(data.commandId));
        break;
      case 'stdout':
      case 'stderr':
      case 'gap': {
        const item = execItemOf(event.event, data);
        if (item?.stream === 'gap') options.onGap?.({ from: item.from, to: item.to });
        else if (item) options.onLine?.(item);
        break;
      }
      case 'result':
        return data as unknown as ExecResult;
      case 'error': {
        const problem = ProblemBodySchema.safeParse(data);
        throw problem.success ? errorOfProblem(problem.data, subject) : new Error(event.data);
      }
      default:
        // Events a later API adds are not this client's business.
        break;
    }
  }
  throw new Error('the API ended the command stream before its result');
}
