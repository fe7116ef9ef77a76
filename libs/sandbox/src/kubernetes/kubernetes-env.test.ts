import { describe, expect, it } from 'vitest';
import { createKubernetesBackend } from './index.js';
import { kubernetesSettingsFromEnv } from './kubernetes-env.js';

describe('Kubernetes settings from the environment', () => {
  it('reads namespace, owner (downward API) and the Redis URL source', () => {
    const settings = kubernetesSettingsFromEnv({
      SANDSTREAM_AGENT_CARRIER_IMAGE: 'sandstream/agent-carrier:1.0.0',
      POD_NAME: 'pod-lifecycle-0',
      POD_UID: 'uid-1',
      POD_NAMESPACE: 'sandstream',
      SANDSTREAM_K8S_REDIS_URL_SOURCE: 'redis-credentials/url',
      SANDSTREAM_K8S_SERVICE_ACCOUNT: ' ',
    });
    expect(settings).toEqual({
      agentCarrierImage: 'sandstream/agent-carrier:1.0.0',
      namespace: 'sandstream',
      owner: { name: 'pod-lifecycle-0', uid: 'uid-1', namespace: 'sandstream' },
      redisUrlSource: { secretName: 'redis-credentials', key: 'url' },
    });
  });

  it('names the variable that is missing or malformed', () => {
    expect(() => kubernetesSettingsFromEnv({})).toThrow(/SANDSTREAM_AGENT_CARRIER_IMAGE/);
    expect(() =>
      kubernetesSettingsFromEnv({
        SANDSTREAM_AGENT_CARRIER_IMAGE: 'c',
        SANDSTREAM_K8S_REDIS_URL_SOURCE: 'a/b/c',
      }),
    ).toThrow(/SANDSTREAM_K8S_REDIS_URL_SOURCE/);
  });

  it('reads the egress proxy: the URL sandboxes get, and the port this replica serves it on', () => {
    expect(
      kubernetesSettingsFromEnv({
        SANDSTREAM_AGENT_CARRIER_IMAGE: 'c',
        SANDSTREAM_K8S_EGRESS_PROXY_URL: 'http://sandstream-egress-proxy:3128',
        SANDSTREAM_K8S_EGRESS_PROXY_LISTEN_PORT: '3128',
      }).egressProxy,
    ).toEqual({ url: 'http://sandstream-egress-proxy:3128', listenPort: 3128 });
    expect(() =>
      kubernetesSettingsFromEnv({
        SANDSTREAM_AGENT_CARRIER_IMAGE: 'c',
        SANDSTREAM_K8S_EGRESS_PROXY_LISTEN_PORT: '3128',
      }),
    ).toThrow(/SANDSTREAM_K8S_EGRESS_PROXY_LISTEN_PORT needs SANDSTREAM_K8S_EGRESS_PROXY_URL/);
    expect(() =>
      createKubernetesBackend({ agentCarrierImage: 'c', egressProxy: { url: 'http://u:p@proxy:3128' } }),
    ).toThrow(
      /egressProxy\.url: egressProxy\.url must be http:\/\/host\[:port\], without a path or userinfo/,
    );
    expect(() =>
      createKubernetesBackend({
        agentCarrierImage: 'c',
        egressProxy: { url: 'http://proxy', listenPort: 70_000 },
      }),
    ).toThrow(/egressProxy\.listenPort: egressProxy\.listenPort must be 1-65535/);
    expect(() =>
      createKubernetesBackend({
        agentCarrierImage: 'c',
        egressProxy: { url: 'http://proxy', extra: 1 } as never,
      }),
    ).toThrow(/egressProxy/);
  });

  it('createKubernetesBackend refuses bad options naming the field and the limit', () => {
    expect(() => createKubernetesBackend({ agentCarrierImage: 'c', namespace: 'Not_A_Namespace' })).toThrow(
      /namespace: must be a DNS-1123 label/,
    );
    expect(() =>
      createKubernetesBackend({ agentCarrierImage: 'c', terminationGraceSeconds: 99_999 }),
    ).toThrow(/terminationGraceSeconds/);
  });
});
