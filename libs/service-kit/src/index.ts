export * from './env-config.js';
export * from './graceful-shutdown.js';
export * from './health-server.js';
export * from './run-service.js';
export * from './sandbox-acl-mode.js';
export * from './service-env.js';
export * from './service-process.js';
export * from './sleep.js';
