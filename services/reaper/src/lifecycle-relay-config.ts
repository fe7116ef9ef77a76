import { serviceEnvSchema } from '@sandstream/service-kit';
import { z } from 'zod';
import { LogArchiveEnv } from './log-archive-config.js';

/** The lifecycle relay's own variables (read by relay-main.ts, and by the reaper that hosts it). */
export const LifecycleRelayEnv = {
  NATS_URL: z
    .string()
    .regex(/^(nats|tls|wss?):\/\//, 'NATS_URL must start with nats://, tls://, ws:// or wss://'),
  /** First subject token of relayed events. */
  NATS_SUBJECT_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_-]+$/, 'one subject token: letters, digits, _ and -')
    .default('sandstream'),
} as const;

export const LifecycleRelayEnvSchema = serviceEnvSchema(8085).extend({
  ...LifecycleRelayEnv,
  ...LogArchiveEnv,
});
export type LifecycleRelayEnvConfig = z.output<typeof LifecycleRelayEnvSchema>;
