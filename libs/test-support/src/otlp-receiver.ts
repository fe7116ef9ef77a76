import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';
import protobuf from 'protobufjs';
import { pollUntil } from './poll.js';

/*
 * An OTLP/HTTP collector stand-in for tests: accepts /v1/traces in both encodings the SDKs use
 * (application/json and application/x-protobuf, optionally gzipped), normalises spans into
 * plain objects and lets a test wait for the spans it expects. /v1/metrics and /v1/logs are
 * accepted and counted so exporters do not log errors.
 *
 * The protobuf schema below is the subset of opentelemetry-proto's trace messages the tests
 * read, with the same field numbers; unknown fields are skipped by the decoder.
 */
const TRACE_PROTO = `
syntax = "proto3";
package otlp;
message ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
message ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; }
message Resource { repeated KeyValue attributes = 1; }
message ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; }
message InstrumentationScope { string name = 1; string version = 2; }
message Span {
  bytes trace_id = 1; bytes span_id = 2; string trace_state = 3; bytes parent_span_id = 4;
  string name = 5; int32 kind = 6; fixed64 start_time_unix_nano = 7; fixed64 end_time_unix_nano = 8;
  repeated KeyValue attributes = 9; repeated Event events = 11; repeated Link links = 13; Status status = 15;
}
message Event { fixed64 time_unix_nano = 1; string name = 2; repeated KeyValue attributes = 3; }
message Link { bytes trace_id = 1; bytes span_id = 2; string trace_state = 3; repeated KeyValue attributes = 4; }
message Status { string message = 2; int32 code = 3; }
message KeyValue { string key = 1; AnyValue value = 2; }
message AnyValue {
  oneof value {
    string string_value = 1; bool bool_value = 2; int64 int_value = 3; double double_value = 4;
    ArrayValue array_value = 5; KeyValueList kvlist_value = 6; bytes bytes_value = 7;
  }
}
message ArrayValue { repeated AnyValue values = 1; }
message KeyValueList { repeated KeyValue values = 1; }
`;

const ExportTraceServiceRequest = protobuf
  .parse(TRACE_PROTO, { keepCase: false })
  .root.lookupType('otlp.ExportTraceServiceRequest');

export type AttributeValue = string | number | boolean | null | AttributeValue[];

export const SpanKindName = ['unspecified', 'internal', 'server', 'client', 'producer', 'consumer'] as const;
export const StatusCodeName = ['unset', 'ok', 'error'] as const;

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** Undefined for a root span. */
  parentSpanId: string | undefined;
  name: string;
  kind: (typeof SpanKindName)[number];
  startTimeUnixNano: bigint;
  endTimeUnixNano: bigint;
  attributes: Record<string, AttributeValue>;
  status: { code: (typeof StatusCodeName)[number]; message: string | undefined };
  links: { traceId: string; spanId: string; attributes: Record<string, AttributeValue> }[];
  events: { name: string; attributes: Record<string, AttributeValue> }[];
  /** The resource's service.name. */
  service: string;
  scope: string;
  /** Which encoding the span arrived in. */
  encoding: 'json' | 'protobuf';
}

type Obj = Record<string, unknown>;
const asObj = (v: unknown): Obj => (v !== null && typeof v === 'object' ? (v as Obj) : {});
const asArray = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

/** Ids arrive as bytes from protobuf and as hex strings in OTLP/JSON. */
function hexId(v: unknown): string {
  if (v instanceof Uint8Array) return Buffer.from(v).toString('hex');
  return typeof v === 'string' ? v.toLowerCase() : '';
}

function anyValue(v: unknown): AttributeValue {
  const o = asObj(v);
  if ('stringValue' in o) return String(o.stringValue);
  if ('boolValue' in o) return Boolean(o.boolValue);
  if ('intValue' in o) return Number(o.intValue);
  if ('doubleValue' in o) return Number(o.doubleValue);
  if ('arrayValue' in o) return asArray(asObj(o.arrayValue).values).map(anyValue);
  return null;
}

function attributes(list: unknown): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const kv of asArray(list)) out[String(asObj(kv).key)] = anyValue(asObj(kv).value);
  return out;
}

function nanos(v: unknown): bigint {
  if (typeof v === 'string' || typeof v === 'number' || typeof v === 'bigint') return BigInt(v);
  return 0n;
}

function normalise(request: unknown, encoding: ReceivedSpan['encoding']): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const rs of asArray(asObj(request).resourceSpans)) {
    const resource = attributes(asObj(asObj(rs).resource).attributes);
    for (const ss of asArray(asObj(rs).scopeSpans)) {
      const scope = String(asObj(asObj(ss).scope).name ?? '');
      for (const raw of asArray(asObj(ss).spans)) {
        const s = asObj(raw);
        const parent = hexId(s.parentSpanId);
        const status = asObj(s.status);
        spans.push({
          traceId: hexId(s.traceId),
          spanId: hexId(s.spanId),
          parentSpanId: parent && !/^0+$/.test(parent) ? parent : undefined,
          name: String(s.name ?? ''),
          kind: SpanKindName[Number(s.kind ?? 0)] ?? 'unspecified',
          startTimeUnixNano: nanos(s.startTimeUnixNano),
          endTimeUnixNano: nanos(s.endTimeUnixNano),
          attributes: attributes(s.attributes),
          status: {
            code: StatusCodeName[Number(status.code ?? 0)] ?? 'unset',
            message: typeof status.message === 'string' && status.message !== '' ? status.message : undefined,
          },
          links: asArray(s.links).map((l) => ({
            traceId: hexId(asObj(l).traceId),
            spanId: hexId(asObj(l).spanId),
            attributes: attributes(asObj(l).attributes),
          })),
          events: asArray(s.events).map((e) => ({
            name: String(asObj(e).name ?? ''),
            attributes: attributes(asObj(e).attributes),
          })),
          service: String(resource['service.name'] ?? ''),
          scope,
          encoding,
        });
      }
    }
  }
  return spans;
}

function collectMetricNames(request: unknown, into: Map<string, Set<string>>): void {
  for (const rm of asArray(asObj(request).resourceMetrics)) {
    const service = String(attributes(asObj(asObj(rm).resource).attributes)['service.name'] ?? '');
    const names = into.get(service) ?? new Set<string>();
    into.set(service, names);
    for (const sm of asArray(asObj(rm).scopeMetrics)) {
      for (const m of asArray(asObj(sm).metrics)) names.add(String(asObj(m).name ?? ''));
    }
  }
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const body = Buffer.concat(chunks);
  return req.headers['content-encoding'] === 'gzip' ? gunzipSync(body) : body;
}

export function decodeTraceRequest(body: Buffer, contentType: string): ReceivedSpan[] {
  if (contentType.includes('json')) return normalise(JSON.parse(body.toString('utf8')), 'json');
  const message = ExportTraceServiceRequest.decode(body);
  return normalise(ExportTraceServiceRequest.toObject(message, { longs: String, oneofs: false }), 'protobuf');
}

export interface OtlpReceiver {
  /** Base URL for OTEL_EXPORTER_OTLP_ENDPOINT (exporters append /v1/traces). */
  readonly url: string;
  readonly spans: ReceivedSpan[];
  readonly requests: { traces: number; metrics: number; logs: number; rejected: number };
  /** Names of the metrics received in OTLP/JSON, by service.name (protobuf metrics are only counted). */
  readonly metricNames: Map<string, Set<string>>;
  /** Resolves with the spans once `done(spans)` holds; rejects with what was received on timeout. */
  waitFor(done: (spans: ReceivedSpan[]) => boolean, timeoutMs?: number): Promise<ReceivedSpan[]>;
  /** Makes the next `n` trace requests fail with HTTP 503, to test exporters' error handling. */
  failNext(n: number): void;
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const requests = { traces: 0, metrics: 0, logs: 0, rejected: 0 };
  const metricNames = new Map<string, Set<string>>();
  let failures = 0;
  const server: Server = createServer((req, res) => {
    readBody(req)
      .then((body) => {
        const type = String(req.headers['content-type'] ?? '');
        const reply = (status: number) => {
          res.writeHead(status, { 'content-type': type.includes('json') ? 'application/json' : type });
          res.end(type.includes('json') ? '{}' : undefined);
        };
        if (req.method !== 'POST') return reply(405);
        if (req.url === '/v1/traces') {
          if (failures > 0) {
            failures -= 1;
            requests.rejected += 1;
            return reply(503);
          }
          requests.traces += 1;
          spans.push(...decodeTraceRequest(body, type));
          return reply(200);
        }
        if (req.url === '/v1/metrics') {
          requests.metrics += 1;
          if (type.includes('json')) collectMetricNames(JSON.parse(body.toString('utf8')), metricNames);
          return reply(200);
        }
        if (req.url === '/v1/logs') {
          requests.logs += 1;
          return reply(200);
        }
        return reply(404);
      })
      .catch(() => {
        requests.rejected += 1;
        res.writeHead(400).end();
      });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    requests,
    metricNames,
    failNext(n) {
      failures = n;
    },
    async waitFor(done, timeoutMs = 15_000) {
      // Used by the telemetry bench too, so the polling is the plain helper, not vi.waitFor.
      return pollUntil('spans', () => done(spans) && spans, { timeoutMs }).catch(() => {
        const seen = spans.map((s) => `${s.service}:${s.name}`).join(', ');
        throw new Error(`OTLP receiver: condition not met after ${timeoutMs} ms; spans: [${seen}]`);
      });
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
