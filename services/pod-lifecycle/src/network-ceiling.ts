import { TemplateRegistry } from '@sandstream/sandbox';
import type { Logger } from '@sandstream/telemetry';
import { type Egress, egressOf } from '@sandstream/wire';

/**
 * The egress policy a sandbox's template sets, which a running sandbox's update may not widen
 * (network-processor.ts). Read from the scheduler's templates file when this service is given it
 * (its defaults count too); without it a sandbox of no template has the default, `internet`, and
 * one of a template is held to what it may always do: narrow to `none`.
 */
export async function openNetworkCeiling(
  templatesFile: string | undefined,
  logger: Logger,
): Promise<{ ceiling(template: string | undefined): Egress | undefined; close(): void }> {
  if (!templatesFile)
    return { ceiling: (template) => (template === undefined ? 'internet' : 'none'), close() {} };
  const registry = await TemplateRegistry.open({
    path: templatesFile,
    onReload: (event) => {
      if (!event.ok)
        logger.error({ err: event.error.message }, 'templates file invalid; network ceilings kept');
    },
  });
  return {
    ceiling(template) {
      try {
        // Only the network is wanted, but resolve checks the whole spec: an image stands in where
        // neither the template nor the file's defaults name one (the request gave it at create).
        const spec = { image: 'network-ceiling' };
        return egressOf(registry.resolve(template === undefined ? { spec } : { template, spec }).network);
      } catch {
        // A template removed since: nothing wider than `none` is known to be allowed.
        return 'none';
      }
    },
    close: () => registry.close(),
  };
}
