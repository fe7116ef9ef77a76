// The private redis-server helper lives beside the sandbox library's tests, which use it too.
export { type OwnRedis, startOwnRedis } from '../../libs/sandbox/src/testing/redis-server.js';
