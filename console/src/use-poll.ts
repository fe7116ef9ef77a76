import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api';

export interface Polled<T> {
  data: T | undefined;
  error: string | undefined;
  reload: () => void;
}

/**
 * Reads `load` now and every `everyMs` while the page is open (the API has no list-wide event
 * stream; a record's own changes come over SSE on its page). A reload is also asked by the page
 * after an action. Reads do not overlap.
 */
export function usePoll<T>(load: () => Promise<T>, everyMs: number, deps: unknown[]): Polled<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  const [tick, setTick] = useState(0);
  const running = useRef(false);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  // The caller names what `load` depends on (deps); a new closure each render is not a change.
  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setInterval> | undefined;
    const read = async () => {
      if (running.current) return;
      running.current = true;
      try {
        const value = await load();
        if (live) {
          setData(value);
          setError(undefined);
        }
      } catch (err) {
        if (live) setError(err instanceof Error ? err.message : String(err));
        // Gone or not this key's to see: asking again will not change that.
        if (err instanceof ApiError && (err.status === 404 || err.status === 403)) clearInterval(timer);
      } finally {
        running.current = false;
      }
    };
    void read();
    timer = setInterval(read, everyMs);
    return () => {
      live = false;
      clearInterval(timer);
    };
  }, [...deps, tick]);
  return { data, error, reload };
}
