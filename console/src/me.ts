import { getJson } from './api';

/** Who the signed-in key is (GET /v1/auth/me). */
export interface Me {
  keyId: string;
  tenant: string;
  admin: boolean;
}

export function fetchMe(key?: string): Promise<Me> {
  return getJson<Me>('/v1/auth/me', key ? { key } : {});
}
