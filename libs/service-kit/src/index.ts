export * from './env-config.js';
export * from './graceful-shutdown.js';
export * from './health-server.js';
export * from './periodic-task.js';
export * from './progress-watchdog.js';
export * from './service-process.js';
export * from './sleep.js';
export * from './throttled-error-log.js';
