import { CodeResultSchema } from '@sandstream/wire';
import { type Execution, ExecutionSchema } from '../code-execution.js';
import type { RunCommandOptions } from '../command-runner.js';
import { errorOfProblem, ProblemBodySchema, type ProblemSubject } from './problem-errors.js';
import type { ServerSentEvent } from './sse-parser.js';

/**
 * A code cell's event stream as the API sends it for POST …/code: `started` (its command id),
 * `stdout` / `stderr` lines, a `result` for each rich result, then the `execution` (or an
 * `error` problem). The API sends every result of the cell once, in order, as it reaches it (the
 * API's own runCode onResult), so the n-th `result` is the cell's results[n].
 */
export async function followCodeEvents(
  events: AsyncIterable<ServerSentEvent>,
  options: RunCommandOptions,
  subject: ProblemSubject,
): Promise<Execution> {
  let seq = 0;
  let results = 0;
  for await (const event of events) {
    const data = JSON.parse(event.data) as Record<string, unknown>;
    switch (event.event) {
      case 'started':
        options.onStart?.(String(data.commandId));
        break;
      case 'stdout':
      case 'stderr':
        options.onLine?.({ stream: event.event, line: String(data.line), seq: ++seq });
        break;
      case 'result': {
        const result = options.onResult ? CodeResultSchema.safeParse(data) : undefined;
        if (result?.success) options.onResult?.(results, result.data);
        results += 1;
        break;
      }
      case 'execution':
        return ExecutionSchema.parse(data);
      case 'error': {
        const problem = ProblemBodySchema.safeParse(data);
        throw problem.success ? errorOfProblem(problem.data, subject) : new Error(event.data);
      }
      default:
        break;
    }
  }
  throw new Error('the API ended the code stream before its execution');
}
