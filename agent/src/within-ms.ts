/**
 * The promise's value, or undefined if it takes longer than `ms`. Used where waiting on Redis
 * must have an end (cleanup at exit); the promise itself is left to settle on its own.
 */
export async function withinMs<T>(ms: number, promise: Promise<T>): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
