export * from './lifecycle-relay.js';
export * from './reap-scripts.js';
export * from './reaper.js';
export * from './reaper-config.js';
