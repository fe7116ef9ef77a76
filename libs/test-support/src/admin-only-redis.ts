import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import type { RedisServer } from './redis-server.js';

/**
 * Locks a test's own Redis the way a deployment with a Redis user per sandbox ships: `default`
 * turned off, and an `admin` user with every right for the services. Answers the admin's URL.
 */
export async function closeDefaultRedisUser(server: RedisServer): Promise<string> {
  const password = randomBytes(12).toString('hex');
  const setup = new Redis(server.url);
  await setup.call('ACL', 'SETUSER', 'admin', 'on', `>${password}`, '~*', '&*', '+@all');
  await setup.call('ACL', 'SETUSER', 'default', 'off');
  setup.disconnect();
  return `redis://admin:${password}@127.0.0.1:${server.port}`;
}
