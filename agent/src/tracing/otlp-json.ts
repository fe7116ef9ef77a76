/*
 * The OTLP/JSON encoding of finished spans (opentelemetry-proto, JSON mapping): ids as lower-case
 * hex, times as decimal strings of nanoseconds since the epoch, enums as integers.
 */

export type SpanAttributeValue = string | number | boolean | readonly string[];

export interface FinishedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  traceState: string | undefined;
  name: string;
  /** OTLP SpanKind: 1 internal. */
  kind: number;
  startTimeUnixNano: bigint;
  endTimeUnixNano: bigint;
  attributes: Record<string, SpanAttributeValue>;
  /** OTLP StatusCode: 0 unset, 1 ok, 2 error. */
  status: { code: 0 | 1 | 2; message?: string };
}

type AnyValue =
  | { stringValue: string }
  | { intValue: string }
  | { doubleValue: number }
  | { boolValue: boolean }
  | { arrayValue: { values: AnyValue[] } };

function anyValue(value: SpanAttributeValue): AnyValue {
  if (typeof value === 'string') return { stringValue: value };
  if (typeof value === 'boolean') return { boolValue: value };
  if (typeof value === 'number')
    return Number.isInteger(value) ? { intValue: String(value) } : { doubleValue: value };
  return { arrayValue: { values: value.map((v) => ({ stringValue: v })) } };
}

const keyValues = (attrs: Record<string, SpanAttributeValue>) =>
  Object.entries(attrs).map(([key, value]) => ({ key, value: anyValue(value) }));

export function encodeSpans(
  spans: readonly FinishedSpan[],
  resource: Record<string, SpanAttributeValue>,
  scope: { name: string; version?: string },
): string {
  return JSON.stringify({
    resourceSpans: [
      {
        resource: { attributes: keyValues(resource) },
        scopeSpans: [
          {
            scope,
            spans: spans.map((s) => ({
              traceId: s.traceId,
              spanId: s.spanId,
              ...(s.parentSpanId ? { parentSpanId: s.parentSpanId } : {}),
              ...(s.traceState ? { traceState: s.traceState } : {}),
              name: s.name,
              kind: s.kind,
              startTimeUnixNano: s.startTimeUnixNano.toString(),
              endTimeUnixNano: s.endTimeUnixNano.toString(),
              attributes: keyValues(s.attributes),
              status: s.status,
            })),
          },
        ],
      },
    ],
  });
}
