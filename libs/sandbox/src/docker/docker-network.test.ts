import { describe, expect, it } from 'vitest';
import { atAddressOf, loopbackToGateway } from './docker-network.js';

describe('the Redis URL a Docker sandbox is given', () => {
  it('sends a loopback URL to the bridge gateway, keeping the sandbox user, db and options', () => {
    expect(loopbackToGateway('redis://sbx-1:p%40ss@127.0.0.1:6380/2?x=1', '172.30.0.1')).toBe(
      'redis://sbx-1:p%40ss@172.30.0.1:6380/2?x=1',
    );
    expect(loopbackToGateway('redis://localhost:6379', '172.30.0.1')).toBe('redis://172.30.0.1:6379');
    expect(loopbackToGateway('redis://redis.internal:6379', '172.30.0.1')).toBeUndefined();
  });

  it("moves the sandbox's own user to a configured address, never the configured credentials", () => {
    expect(atAddressOf('redis://sbx-1:secret@127.0.0.1:6379/0', 'rediss://ops:admin@redis.lan:7000')).toBe(
      'rediss://sbx-1:secret@redis.lan:7000/0',
    );
    // No per-sandbox user in the request: the configured URL is all there is.
    expect(atAddressOf('redis://127.0.0.1:6379', 'redis://redis.lan:7000')).toBe('redis://redis.lan:7000');
  });
});
