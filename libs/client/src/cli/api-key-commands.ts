import { type ApiKeyStore, TenantSchema } from '@sandstream/bus';
import { ExitCodes } from './exit-codes.js';
import { type ParsedCommandLine, UsageError } from './flags.js';

/**
 * `sandstream apikey create|ls|revoke`: the HTTP API's keys, straight in Redis (so the first
 * admin key can exist before any key does). `create` prints the key alone on stdout, for
 * `KEY=$(sandstream apikey create --tenant acme)`.
 */
export async function apiKeyCommand(
  command: 'apikey create' | 'apikey ls' | 'apikey revoke',
  arg: string | undefined,
  values: ParsedCommandLine['values'],
  store: ApiKeyStore,
): Promise<number> {
  switch (command) {
    case 'apikey create': {
      const tenant = TenantSchema.safeParse(values.tenant);
      if (!tenant.success) throw new UsageError(`--tenant: ${tenant.error.issues[0]?.message}`);
      const { key, info } = await store.create({ tenant: tenant.data, admin: values.admin === true });
      process.stderr.write(
        `created key ${info.id} for tenant ${info.tenant}${info.admin ? ' (admin)' : ''}\n`,
      );
      process.stdout.write(`${key}\n`);
      return ExitCodes.succeeded;
    }
    case 'apikey ls': {
      const keys = await store.list();
      if (values.json) {
        process.stdout.write(`${JSON.stringify(keys, null, 2)}\n`);
        return ExitCodes.succeeded;
      }
      for (const k of keys) {
        process.stdout.write(
          `${k.id}  ${k.tenant.padEnd(20)} ${(k.admin ? 'admin' : '-').padEnd(6)} ${new Date(k.createdAt).toISOString()}\n`,
        );
      }
      return ExitCodes.succeeded;
    }
    case 'apikey revoke': {
      if (!(await store.revoke(arg as string))) {
        process.stderr.write(`sandstream: no API key ${arg}\n`);
        return ExitCodes.notFound;
      }
      process.stdout.write(`revoked ${arg}\n`);
      return ExitCodes.succeeded;
    }
  }
}
