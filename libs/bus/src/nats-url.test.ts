import { describe, expect, it } from 'vitest';
import { natsUrlOptions } from './nats-url.js';

describe('natsUrlOptions', () => {
  it('moves credentials out of the URL, which the nats client would otherwise ignore', () => {
    expect(natsUrlOptions('nats://127.0.0.1:4222')).toEqual({ servers: 'nats://127.0.0.1:4222' });
    expect(natsUrlOptions('nats://svc:p%40ss@nats:4222')).toEqual({
      servers: 'nats://nats:4222',
      user: 'svc',
      pass: 'p@ss',
    });
    expect(natsUrlOptions('tls://t0ken@nats.example:4222')).toEqual({
      servers: 'tls://nats.example:4222',
      token: 't0ken',
    });
  });
});
