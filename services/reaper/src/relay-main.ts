import { runService } from '@sandstream/service-kit';
import { createSandstreamMetrics } from '@sandstream/telemetry';
import { LifecycleRelayEnvSchema } from './lifecycle-relay-config.js';
import { startLifecycleRelay } from './lifecycle-relay-service.js';

// The lifecycle relay (and the JetStream log archiver) alone (`sandstream-lifecycle-relay`), for
// installations that run them apart from the reaper: cleanup and relaying scale and fail
// independently.
runService({
  name: 'lifecycle-relay',
  env: LifecycleRelayEnvSchema,
  async start({ env, logger, keys, connect, onShutdown }) {
    const host = await startLifecycleRelay({
      natsUrl: env.NATS_URL,
      subjectPrefix: env.NATS_SUBJECT_PREFIX,
      keys,
      redis: connect('worker', 'lifecycle-relay'),
      logger,
      onShutdown,
      logArchive: {
        env,
        lifecycleRedis: connect('worker', 'log-archive-discovery'),
        redis: connect('worker', 'log-archive'),
        metrics: createSandstreamMetrics().logArchive,
      },
    });
    return {
      checks: { nats: host.ready },
      liveness: { nats: host.live },
      info: { logArchive: host.archiver?.streamName ?? 'off' },
    };
  },
});
