import { type KeySpace, type RedisClient, SandboxAcl } from '@sandstream/bus';

export type SandboxAclMode = 'auto' | 'on' | 'off';

/**
 * The per-sandbox Redis users as SANDBOX_ACL asks for them (SharedEnv): null when `off`, or when
 * `auto` and this Redis refuses ACL commands. With `on` and no ACL support it throws: a service
 * told to isolate sandboxes must not start without it.
 */
export async function openSandboxAcl(
  mode: SandboxAclMode,
  redis: RedisClient,
  keys: KeySpace,
): Promise<SandboxAcl | null> {
  if (mode === 'off') return null;
  const acl = new SandboxAcl(redis, keys);
  if (await acl.supported()) return acl;
  if (mode === 'on') throw new Error('SANDBOX_ACL=on but this Redis does not accept ACL commands');
  return null;
}
