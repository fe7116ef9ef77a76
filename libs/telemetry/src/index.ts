export * from './logger.js';
export * from './trace-context.js';
