import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { NetworkingV1Api, V1EnvVar, V1NetworkPolicy } from '@kubernetes/client-node';
import { type Egress, EgressSchema } from '@sandstream/wire';
import { isNotFound } from './kube-api-errors.js';
import { egressPolicyName } from './kube-names.js';

/**
 * How a sandbox pod proves to the egress forward proxy (egress-forward-proxy.ts) which sandbox it
 * is, and where the proxy finds what that sandbox may reach. Both sit on the sandbox's own
 * NetworkPolicy, the one object that already says what the pod may reach: it is replaced whole by
 * a live update and deleted with the pod by the garbage collector, so the proxy's view can neither
 * outlive the sandbox nor lag its policy, and nothing new needs cleaning up.
 */

/** The sandbox's policy, as JSON of libs/wire's EgressSchema. */
export const EGRESS_ANNOTATION = 'sandstream.dev/egress';
/** SHA-256 (hex) of the sandbox's proxy token: the token itself is only in the pod's environment. */
export const PROXY_TOKEN_ANNOTATION = 'sandstream.dev/egress-proxy-token-sha256';

/** A fresh proxy token: 32 random bytes, URL-safe (it sits in the userinfo of HTTPS_PROXY). */
export function newProxyToken(): string {
  return randomBytes(32).toString('base64url');
}

export function proxyTokenHash(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/**
 * The variables that send a sandbox's HTTP and HTTPS clients through the proxy: both spellings,
 * as curl reads the lower-case ones and most other tools the upper-case. The pod name and token
 * ride in the proxy URL's userinfo, which clients send as Proxy-Authorization: Basic.
 */
export function proxyEnv(proxyUrl: string, podName: string, token: string): V1EnvVar[] {
  const url = new URL(proxyUrl);
  url.username = podName;
  url.password = token;
  const value = url.toString().replace(/\/$/, '');
  const noProxy = 'localhost,127.0.0.1,::1';
  return [
    { name: 'HTTPS_PROXY', value },
    { name: 'https_proxy', value },
    { name: 'HTTP_PROXY', value },
    { name: 'http_proxy', value },
    { name: 'NO_PROXY', value: noProxy },
    { name: 'no_proxy', value: noProxy },
  ];
}

/** What the proxy knows of one sandbox: the hash of its token and its policy. */
export interface ProxyAccess {
  tokenSha256: string;
  egress: Egress;
}

/** The proxy's view of a sandbox by pod name; undefined when it has no proxy access. */
export type ProxyAccessLookup = (podName: string) => Promise<ProxyAccess | undefined>;

/** The access a policy grants, read back from its annotations; undefined when it grants none. */
export function proxyAccessOf(policy: V1NetworkPolicy): ProxyAccess | undefined {
  const annotations = policy.metadata?.annotations ?? {};
  const tokenSha256 = annotations[PROXY_TOKEN_ANNOTATION];
  const text = annotations[EGRESS_ANNOTATION];
  if (!tokenSha256 || !text) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return undefined;
  }
  const egress = EgressSchema.safeParse(json);
  return egress.success ? { tokenSha256, egress: egress.data } : undefined;
}

const POD_NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/**
 * Reads each sandbox's access from its NetworkPolicy at every connection (no cache: a live update
 * applies to the next connection). A name that is not a pod name is never sent to the API server.
 */
export function networkPolicyAccessLookup(networking: NetworkingV1Api, namespace: string): ProxyAccessLookup {
  return async (podName) => {
    if (!POD_NAME.test(podName)) return undefined;
    try {
      const policy = await networking.readNamespacedNetworkPolicy({
        name: egressPolicyName(podName),
        namespace,
      });
      return proxyAccessOf(policy);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  };
}

/** Whether `token` is the one whose hash the sandbox's policy holds (constant time). */
export function tokenMatches(token: string, tokenSha256: string): boolean {
  const given = Buffer.from(proxyTokenHash(token), 'hex');
  const expected = Buffer.from(tokenSha256, 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}
