import type { MessageInitShape } from '@bufbuild/protobuf';
import { Code, ConnectError, type HandlerContext } from '@connectrpc/connect';
import type { ExecResult } from '@sandstream/client';
import type { ProcessEventSchema } from '../gen/process/process_pb.js';
import { deadlineOf, keepaliveMsOf } from './e2b-connect.js';
import { EventQueue } from './event-queue.js';

/** One message of process.Process/Start's and Connect's streams (StartResponse, ConnectResponse). */
export interface ProcessStreamMessage {
  event: MessageInitShape<typeof ProcessEventSchema>;
}

export function startEvent(pid: number): ProcessStreamMessage {
  return { event: { event: { case: 'start', value: { pid } } } };
}

export function dataEvent(kind: 'stdout' | 'stderr' | 'pty', bytes: Uint8Array): ProcessStreamMessage {
  return { event: { event: { case: 'data', value: { output: { case: kind, value: bytes } } } } };
}

/** E2B's end event of one of our results (a command's or a terminal's). */
export function endEvent(result: ExecResult): ProcessStreamMessage {
  if (result.exitCode === null)
    return {
      event: {
        event: {
          case: 'end',
          value: {
            exitCode: -1,
            exited: false,
            status: 'error',
            error: result.errorMessage ?? 'did not start',
          },
        },
      },
    };
  return {
    event: {
      event: {
        case: 'end',
        value: {
          exitCode: result.exitCode,
          exited: !result.cancelled,
          status: result.cancelled ? 'signal: killed' : `exit status ${result.exitCode}`,
          ...(result.errorMessage ? { error: result.errorMessage } : {}),
        },
      },
    },
  };
}

/** A process stream's messages: keepalives while quiet (at the SDK's Keepalive-Ping-Interval). */
export function processEvents(context: HandlerContext): EventQueue<ProcessStreamMessage> {
  return new EventQueue<ProcessStreamMessage>({
    keepalive: {
      everyMs: keepaliveMsOf(context),
      message: () => ({ event: { event: { case: 'keepalive', value: {} } } }),
    },
  });
}

/** The error a stream that timed out ends with. */
export function timedOut(durationMs?: number): ConnectError {
  const after = durationMs === undefined ? '' : ` after ${durationMs} ms`;
  return new ConnectError(`the process timed out${after}`, Code.DeadlineExceeded);
}

/**
 * After what was queued, the end the result is: its end event, or the error a timeout is (a
 * timed-out process is Connect's deadline_exceeded, the SDK's TimeoutError). The call's deadline
 * and the command's timeout are the same number: whichever fires first, the caller sees a timeout.
 */
export function finish(queue: EventQueue<ProcessStreamMessage>, context: HandlerContext, result: ExecResult) {
  if (result.timedOut || (result.cancelled && deadlineOf(context) !== undefined)) {
    queue.end(timedOut(result.durationMs));
    return;
  }
  queue.push(endEvent(result));
  queue.end();
}
