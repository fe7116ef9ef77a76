import type { TraceContext } from '@sandstream/wire';

export interface ParentSpan {
  traceId: string;
  spanId: string;
  /** The sampled flag: an unsampled parent means its trace is not being recorded anywhere. */
  sampled: boolean;
  traceState: string | undefined;
}

// version-traceid-parentid-flags; later versions may append fields, which we ignore (W3C §3.2.4).
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/** Parses a W3C traceparent; anything malformed, all-zero or version ff yields undefined. */
export function parseTraceparent(tc: TraceContext | undefined): ParentSpan | undefined {
  const match = tc ? TRACEPARENT.exec(tc.traceparent.trim()) : null;
  if (!match || !tc) return undefined;
  const [, version, traceId, spanId, flags, rest] = match as unknown as [
    string,
    string,
    string,
    string,
    string,
    string?,
  ];
  if (version === 'ff' || (version === '00' && rest !== undefined)) return undefined;
  if (/^0+$/.test(traceId) || /^0+$/.test(spanId)) return undefined;
  return {
    traceId,
    spanId,
    sampled: (Number.parseInt(flags, 16) & 1) === 1,
    traceState: tc.tracestate,
  };
}
