/** dockerode rejects with an Error carrying the engine's HTTP status. */
export function dockerStatus(err: unknown): number | undefined {
  const status = (err as { statusCode?: unknown } | null)?.statusCode;
  return typeof status === 'number' ? status : undefined;
}

export const isNotFound = (err: unknown) => dockerStatus(err) === 404;
export const isConflict = (err: unknown) => dockerStatus(err) === 409;

/** Runs a removal and treats "already gone" (404) and "removal in progress" (409) as success. */
export async function ignoreGone(action: () => Promise<unknown>): Promise<void> {
  try {
    await action();
  } catch (err) {
    if (isNotFound(err) || isConflict(err)) return;
    throw err;
  }
}
