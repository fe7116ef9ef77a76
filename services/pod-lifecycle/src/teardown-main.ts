// One-shot: ends a run of the services by destroying every sandbox it made (run-teardown.ts).
// `npm start` runs it with its services' environment once they have stopped; an operator can run
// it to remove an installation (`node services/pod-lifecycle/dist/teardown-main.js`). Never part
// of a service's shutdown. Exit 0 when everything went, 1 otherwise; the last log line is the
// report.
import {
  createKeySpace,
  createRedis,
  InstallationIdentity,
  installationOf,
  JobStore,
  LeaseRenewal,
  WarmPoolStore,
} from '@sandstream/bus';
import { createBackend, resourcePolicyOf } from '@sandstream/sandbox';
import { loadEnvConfig, openSandboxAcl, throttledErrorLog } from '@sandstream/service-kit';
import { createLogger } from '@sandstream/telemetry';
import type { Redis } from 'ioredis';
import { PodLifecycleEnvSchema } from './pod-lifecycle-config.js';
import { tearDownRun } from './run-teardown.js';

const logger = createLogger({ service: 'pod-lifecycle-teardown' });
const env = loadEnvConfig('pod-lifecycle-teardown', PodLifecycleEnvSchema);
const keys = createKeySpace(env.SANDSTREAM_NAMESPACE);
const redis = createRedis({
  url: env.REDIS_URL,
  clusterNodes: env.REDIS_CLUSTER_NODES,
  role: 'producer',
  connectionName: 'pod-lifecycle-teardown',
});
redis.on('error', throttledErrorLog(logger, 'redis'));
let installation = env.SANDSTREAM_INSTALLATION ?? '(unknown)';
let code = 1;
try {
  // The ids this Redis gave its sandboxes (installation.ts): with the name, they say which are this
  // run's, so a deployment that shares the name but not the Redis is never touched.
  const identity = new InstallationIdentity(redis, keys);
  const installationIds = await identity.known();
  installation = installationOf(env, identity.id);
  const { backend } = await createBackend({ redis: redis as Redis, resourcePolicy: resourcePolicyOf(env) });
  try {
    const report = await tearDownRun(
      {
        store: new JobStore({ redis, keys }),
        leases: new LeaseRenewal({ redis, keys, leaseMs: env.LEASE_SECONDS * 1000 }),
        redis,
        keys,
        backend,
        acl: await openSandboxAcl(env.SANDBOX_ACL, redis, keys),
        pools: new WarmPoolStore(redis, keys),
        installation,
        installationIds,
        // The run is over: nothing is waited for.
        graceMs: 0,
        logger,
      },
      process.env.SANDSTREAM_TEARDOWN_REASON ?? 'the run was torn down',
    );
    code = report.failed === 0 ? 0 : 1;
    logger.info({ installation, ...report }, 'run torn down');
  } finally {
    await backend.close();
  }
} catch (err) {
  logger.error({ installation, err: (err as Error).message }, 'run teardown failed');
} finally {
  redis.disconnect();
}
logger.flush();
process.exitCode = code;
