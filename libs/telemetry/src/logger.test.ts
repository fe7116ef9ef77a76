import { PassThrough } from 'node:stream';
import { trace } from '@opentelemetry/api';
import { useInMemoryTracing } from '@sandstream/test-support/vitest';
import { describe, expect, it } from 'vitest';
import { createLogger, silentLogger } from './logger.js';

// Spans are made only so that log lines have a trace to carry; none is read back.
useInMemoryTracing();

function capture() {
  const stream = new PassThrough();
  const lines: Record<string, unknown>[] = [];
  stream.on('data', (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n')) if (line) lines.push(JSON.parse(line));
  });
  return { stream, lines };
}

describe('createLogger', () => {
  it('tags lines with the active span ids and leaves them off outside spans', async () => {
    const { stream, lines } = capture();
    const log = createLogger({ service: 'unit', level: 'info', destination: stream });
    log.info('outside');
    const tracer = trace.getTracer('test');
    let ids: { traceId: string; spanId: string } | undefined;
    await tracer.startActiveSpan('work', async (span) => {
      ids = span.spanContext();
      // A timer turn, not an event stood in for: what is tested is that the span survives a real
      // macrotask boundary. After it, the async context, not a global, carries the span.
      await new Promise((r) => setTimeout(r, 5));
      log.info({ step: 1 }, 'inside');
      span.end();
    });
    await new Promise((r) => setImmediate(r));
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatchObject({ service: 'unit', level: 'info', msg: 'outside' });
    expect(lines[0]).not.toHaveProperty('trace_id');
    expect(lines[1]).toMatchObject({
      msg: 'inside',
      step: 1,
      trace_id: ids?.traceId,
      span_id: ids?.spanId,
    });
  });

  it('rejects a bad LOG_LEVEL with the field name', () => {
    const old = process.env.LOG_LEVEL;
    process.env.LOG_LEVEL = 'loud';
    try {
      expect(() => createLogger({ service: 'x' })).toThrow(/LOG_LEVEL must be one of/);
    } finally {
      if (old === undefined) delete process.env.LOG_LEVEL;
      else process.env.LOG_LEVEL = old;
    }
  });
});

describe('silentLogger', () => {
  it('is at level silent, so nothing it is given is written, and keeps its service binding', () => {
    const logger = silentLogger('quiet-test');
    expect(logger.level).toBe('silent');
    expect(logger.isLevelEnabled('fatal')).toBe(false);
    expect(logger.bindings()).toMatchObject({ service: 'quiet-test' });
  });
});
