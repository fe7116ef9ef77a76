import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  type IdGenerator,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll } from 'vitest';

/**
 * For the calling test file: a global tracer provider that keeps finished spans in memory, and
 * an async-hooks context manager so the active span follows awaits as it does in the services.
 * Both are registered before the file's tests and removed after them, so files do not see each
 * other's spans. Returns the exporter the spans are read from.
 */
export function useInMemoryTracing(options: { idGenerator?: IdGenerator } = {}): InMemorySpanExporter {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(exporter)],
    ...(options.idGenerator ? { idGenerator: options.idGenerator } : {}),
  });
  beforeAll(() => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    trace.setGlobalTracerProvider(provider);
  });
  afterAll(async () => {
    await provider.shutdown();
    trace.disable();
    context.disable();
  });
  return exporter;
}
