import { readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import type Dockerode from 'dockerode';
import { z } from 'zod';

/**
 * How a container's root file system relates to the engine's directories on this host:
 * - `host`: not gVisor (runc): the host sees its files as it does.
 * - `gvisor-shared`: runsc with `--file-access=shared` (and no overlay of its own over the root):
 *   its Sentry revalidates the root file system against the host, so a write from the host into
 *   the container's layer is seen inside, in place, and its own writes reach the layer at once.
 * - `gvisor-exclusive`: runsc's default: the Sentry caches the root file system, so the host's
 *   writes are not seen inside (docs/snapshots.md): its files go through the container.
 */
export type RootFileAccess = 'host' | 'gvisor-shared' | 'gvisor-exclusive';

const EngineRuntimesSchema = z.object({
  Runtimes: z
    .record(
      z.string(),
      z.object({ path: z.string().optional(), runtimeArgs: z.array(z.string()).nullish() }).loose(),
    )
    .nullish(),
});

/** runsc's flags whose value may follow as the next argument (Go's flag package). */
const VALUE_FLAGS = new Set(['file-access', 'overlay2']);

/**
 * Whether runsc's flags (its global ones, before the subcommand, as the engine passes
 * `runtimeArgs`) make the root file system shared with the host: `--file-access=shared`, and no
 * overlay of the Sentry's own over the root (`--overlay`, or `--overlay2` other than `none`),
 * whose writes would never reach the host. Parsed as runsc parses them: `-` or `--`, `=value` or
 * the next argument, the last one winning, up to the first argument that is not a flag.
 */
export function sharesRootFiles(args: readonly string[]): boolean {
  let access = 'exclusive';
  let overlay = false;
  for (let i = 0; i < args.length; i++) {
    const flag = /^--?([a-z0-9-]+)(?:=(.*))?$/.exec(args[i] ?? '');
    if (!flag) break;
    const [, name, inline] = flag;
    const value = inline ?? (VALUE_FLAGS.has(name ?? '') ? args[++i] : undefined);
    if (name === 'file-access') access = value ?? '';
    else if (name === 'overlay') overlay = value === undefined || value === 'true';
    else if (name === 'overlay2') overlay = value !== 'none';
  }
  return access === 'shared' && !overlay;
}

/**
 * Which of the engine's runtimes are gVisor, and which of those share the root file system:
 * read once from `docker info` (name, path, runtimeArgs) and again only when a container names a
 * runtime that read did not know. A runtime is gVisor when its binary is runsc or when the
 * backend's runtime map calls it so (`gvisorNames`).
 */
export class GvisorFileAccess {
  private runtimes: Promise<Map<string, RootFileAccess>> | undefined;

  constructor(
    private readonly docker: Dockerode,
    private readonly gvisorNames: ReadonlySet<string>,
  ) {}

  /**
   * The container's own access, given its inspect. The engine's current runtimeArgs may be newer
   * than the container (a daemon.json changed and reloaded since it started), so when this
   * process sees the container's runsc sandbox process (its `State.Pid`, same host and PID
   * namespace) its command line decides; otherwise the engine's configuration does.
   */
  async of(info: Dockerode.ContainerInspectInfo): Promise<RootFileAccess> {
    const runtime = info.HostConfig?.Runtime ?? '';
    const configured = await this.configured(runtime);
    if (configured === 'host') return 'host';
    const started = await runscCommandLine(info.State?.Pid);
    if (started) return sharesRootFiles(started) ? 'gvisor-shared' : 'gvisor-exclusive';
    return configured;
  }

  private async configured(runtime: string): Promise<RootFileAccess> {
    let known = await this.read(false);
    if (!known.has(runtime)) known = await this.read(true);
    // A gVisor name the engine does not list (yet) is taken at its most careful.
    return known.get(runtime) ?? (this.gvisorNames.has(runtime) ? 'gvisor-exclusive' : 'host');
  }

  private read(again: boolean): Promise<Map<string, RootFileAccess>> {
    if (!this.runtimes || again) {
      const reading = this.docker.info().then((raw: unknown) => {
        const runtimes = EngineRuntimesSchema.parse(raw).Runtimes ?? {};
        const access = new Map<string, RootFileAccess>();
        for (const [name, { path, runtimeArgs }] of Object.entries(runtimes)) {
          const gvisor = this.gvisorNames.has(name) || basename(path ?? '') === 'runsc';
          access.set(
            name,
            !gvisor ? 'host' : sharesRootFiles(runtimeArgs ?? []) ? 'gvisor-shared' : 'gvisor-exclusive',
          );
        }
        return access;
      });
      // A failed read is not kept: the next container asks again.
      reading.catch(() => {
        if (this.runtimes === reading) this.runtimes = undefined;
      });
      this.runtimes = reading;
    }
    return this.runtimes;
  }
}

/** The flags a runsc sandbox process was started with (after its own name), or undefined if not seen as one. */
async function runscCommandLine(pid: number | undefined): Promise<string[] | undefined> {
  if (!pid) return undefined;
  const raw = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  const [command, ...args] = raw.split('\0').filter(Boolean);
  return command && basename(command).startsWith('runsc') ? args : undefined;
}
