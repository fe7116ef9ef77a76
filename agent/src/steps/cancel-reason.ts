/**
 * Why a step's AbortSignal fired when a cancel message did it: the message's reason, and the
 * first signal its process group gets (a background process may be asked for SIGINT or SIGHUP).
 */
export class CancelReason extends Error {
  override readonly name = 'CancelReason';
  constructor(
    message: string,
    readonly signal: NodeJS.Signals,
  ) {
    super(message);
  }
}
