import { ConfigError, loadEnvConfig } from '@sandstream/service-kit';
import { describe, expect, it } from 'vitest';
import { SchedulerEnvSchema, tenantSlotLimit } from './scheduler-config.js';

describe('scheduler config', () => {
  it('applies per-tenant slot overrides over the common limit', () => {
    const env = loadEnvConfig('scheduler', SchedulerEnvSchema, {
      SCHEDULER_TENANT_SLOTS: '4',
      SCHEDULER_TENANT_SLOT_OVERRIDES: 'acme=50, trial=1',
    });
    const limit = tenantSlotLimit(env);
    expect([limit('acme'), limit('trial'), limit('other')]).toEqual([50, 1, 4]);
    expect(env.SCHEDULER_GLOBAL_SLOTS).toBe(50);
  });

  it('names each bad override and bad number', () => {
    expect(() =>
      loadEnvConfig('scheduler', SchedulerEnvSchema, {
        SCHEDULER_TENANT_SLOT_OVERRIDES: 'acme=0,Bad=3,ok=2',
        SCHEDULER_RECHECK_SECONDS: 'soon',
      }),
    ).toThrow(
      new ConfigError('scheduler', [
        'SCHEDULER_TENANT_SLOT_OVERRIDES: "acme=0" is not tenant=slots (slots at least 1)',
        'SCHEDULER_TENANT_SLOT_OVERRIDES: "Bad=3" is not tenant=slots (slots at least 1)',
        'SCHEDULER_RECHECK_SECONDS: must be a number',
      ]),
    );
  });
});
