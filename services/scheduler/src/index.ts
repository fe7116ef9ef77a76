export * from './admission-failure.js';
export * from './capacity-waker.js';
export * from './schedule-job.js';
export * from './scheduler-config.js';
export * from './template-resolver.js';
