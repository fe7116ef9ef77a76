export * from './init-telemetry.js';
export * from './logger.js';
export * from './metrics.js';
export * from './planned-span.js';
export * from './spans.js';
export * from './telemetry-config.js';
export * from './trace-context.js';
