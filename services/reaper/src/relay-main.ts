import { runService } from '@sandstream/service-kit';
import { LifecycleRelayEnvSchema } from './lifecycle-relay-config.js';
import { startLifecycleRelay } from './lifecycle-relay-service.js';

// The lifecycle relay alone (`sandstream-lifecycle-relay`), for installations that run it apart
// from the reaper: cleanup and relaying scale and fail independently.
runService({
  name: 'lifecycle-relay',
  env: LifecycleRelayEnvSchema,
  async start({ env, logger, keys, connect, onShutdown }) {
    const nats = await startLifecycleRelay({
      natsUrl: env.NATS_URL,
      subjectPrefix: env.NATS_SUBJECT_PREFIX,
      keys,
      redis: connect('worker', 'lifecycle-relay'),
      logger,
      onShutdown,
    });
    return { checks: { nats } };
  },
});
