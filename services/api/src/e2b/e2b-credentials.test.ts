import { describe, expect, it } from 'vitest';
import { e2bAuthorization } from './e2b-credentials.js';

describe('e2bAuthorization', () => {
  it("takes the e2b SDK's key headers as the bearer key, the in-sandbox token over a Basic user", () => {
    expect(e2bAuthorization({ 'x-api-key': 'k1' })).toBe('Bearer k1');
    expect(e2bAuthorization({ 'x-access-token': 'k2', authorization: 'Basic dXNlcjo=' })).toBe('Bearer k2');
    expect(e2bAuthorization({ authorization: 'Bearer k3' })).toBe('Bearer k3');
    expect(e2bAuthorization({ 'x-api-key': '' })).toBeUndefined();
  });
});
