export * from './api-config.js';
export * from './api-context.js';
export * from './app.js';
export * from './principal.js';
export * from './problem.js';
