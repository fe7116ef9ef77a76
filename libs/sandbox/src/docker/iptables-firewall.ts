import { execFile } from 'node:child_process';
import {
  type EgressTarget,
  egressChain,
  egressChainRules,
  egressNatRules,
  egressRestoreScript,
  isEgressChain,
} from './egress-rules.js';

/** The egress rules of one sandbox as installed: its chain and the job its jumps name. */
export interface InstalledEgress {
  chain: string;
  jobId?: string;
}

/**
 * Installs, checks and removes a sandbox's egress rules with Debian's `iptables` on the host the
 * Docker engine runs on (docs/sandbox-backends.md, "Reach": why this process holds NET_ADMIN).
 * Every change is one `iptables-restore --noflush` transaction, so a policy is replaced whole or
 * not at all; only chains this module made (SSE-…) and the jumps into them are ever touched.
 */
export class IptablesEgressFirewall {
  constructor(
    private readonly commands: { iptables: string; restore: string } = {
      iptables: 'iptables',
      restore: 'iptables-restore',
    },
  ) {}

  /** Installs (withJumps) or replaces the sandbox's chain, then checks every rule is there. */
  async apply(target: EgressTarget, withJumps: boolean): Promise<void> {
    await this.run(this.commands.restore, ['-w', '--noflush'], egressRestoreScript(target, withJumps));
    const missing = await this.missing(target);
    if (missing)
      throw new Error(`egress rules of job ${target.jobId} not in place after install: ${missing}`);
  }

  /** Why the sandbox's rules are not all there (undefined: they are). */
  async missing(target: EgressTarget): Promise<string | undefined> {
    const chain = egressChain(target.jobId);
    const lines = await this.listAll();
    for (const [table, rules] of [
      ['filter', egressChainRules(target)],
      ['nat', egressNatRules(target)],
    ] as const) {
      const have = lines.filter((l) => l.startsWith(`${table} -A ${chain} `)).length;
      if (have !== rules.length) return `${table} chain ${chain} holds ${have} of its ${rules.length} rules`;
    }
    return this.missingJumps(target, lines);
  }

  /** `iptables -S` of the filter and nat tables, each line prefixed with its table. */
  private async listAll(): Promise<string[]> {
    const [filter, nat] = await Promise.all(
      ['filter', 'nat'].map((t) => this.run(this.commands.iptables, ['-w', '-t', t, '-S'])),
    );
    return [
      ...(filter ?? '').split('\n').map((l) => `filter ${l}`),
      ...(nat ?? '').split('\n').map((l) => `nat ${l}`),
    ];
  }

  /** Why a jump into the sandbox's chain is missing (undefined: both are there). */
  async missingJumps(
    target: Pick<EgressTarget, 'jobId' | 'mac'>,
    listed?: string[],
  ): Promise<string | undefined> {
    const chain = egressChain(target.jobId);
    const lines = listed ?? (await this.listAll());
    const mac = target.mac.toLowerCase();
    for (const hook of ['filter DOCKER-USER', 'filter INPUT', 'nat PREROUTING']) {
      const [table, chainName] = hook.split(' ');
      const jump = lines.find(
        (l) =>
          l.startsWith(`${table} -A ${chainName} `) &&
          l.endsWith(`-j ${chain}`) &&
          l.toLowerCase().includes(mac),
      );
      if (!jump) return `no jump from ${hook} to ${chain} for MAC ${target.mac}`;
    }
    return undefined;
  }

  /** Removes the job's jumps and chain; nothing there is fine (idempotent). */
  async remove(jobId: string): Promise<void> {
    await this.removeChains([egressChain(jobId)]);
  }

  /** Every sandbox chain on this host, with the job its jumps name. */
  async installed(): Promise<InstalledEgress[]> {
    const lines = (await this.listAll()).map((l) => l.replace(/^\S+ /, ''));
    const chains = new Map<string, InstalledEgress>();
    for (const line of lines) {
      const declared = /^-N (\S+)$/.exec(line);
      if (declared && isEgressChain(declared[1] as string)) {
        const chain = declared[1] as string;
        if (!chains.has(chain)) chains.set(chain, { chain });
      }
      const jump = /--comment "?sandstream-egress ([^"]+)"? -j (SSE-[0-9a-f]{20})$/.exec(line);
      if (jump) chains.set(jump[2] as string, { chain: jump[2] as string, jobId: jump[1] as string });
    }
    return [...chains.values()];
  }

  /** Removes these chains (only SSE-… names) and every jump into them, in one transaction. */
  async removeChains(names: string[]): Promise<void> {
    const wanted = new Set(names.filter(isEgressChain));
    if (wanted.size === 0) return;
    // Two removals at once may both list a jump; the one that loses the race reads again.
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.removeOnce(wanted);
      } catch (err) {
        if (attempt >= 3) throw err;
      }
    }
  }

  private async removeOnce(wanted: Set<string>): Promise<void> {
    const lines = await this.listAll();
    const script: string[] = [];
    for (const table of ['filter', 'nat']) {
      const own = lines.filter((l) => l.startsWith(`${table} `)).map((l) => l.slice(table.length + 1));
      const changes: string[] = [];
      for (const line of own) {
        const target = / -j (\S+)$/.exec(line)?.[1];
        if (target && wanted.has(target) && /^-A (DOCKER-USER|INPUT|PREROUTING) /.test(line)) {
          changes.push(line.replace(/^-A /, '-D '));
        }
      }
      for (const chain of wanted) {
        if (own.includes(`-N ${chain}`)) changes.push(`-F ${chain}`, `-X ${chain}`);
      }
      if (changes.length > 0) script.push(`*${table}`, ...changes, 'COMMIT');
    }
    if (script.length === 0) return;
    script.push('');
    await this.run(this.commands.restore, ['-w', '--noflush'], script.join('\n'));
  }

  private run(command: string, args: string[], input?: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const child = execFile(
        command,
        args,
        { timeout: 10_000, maxBuffer: 64 << 20 },
        (err, stdout, stderr) => {
          if (!err) return resolve(stdout);
          reject(new Error(explainFailure(command, err as NodeJS.ErrnoException, stderr)));
        },
      );
      if (input !== undefined) child.stdin?.end(input);
    });
  }
}

function explainFailure(command: string, err: NodeJS.ErrnoException, stderr: string): string {
  if (err.code === 'ENOENT') {
    return `${command} is not installed on this host: Docker egress rules need Debian's iptables (apt-get install iptables; npm start installs it)`;
  }
  const detail = stderr.trim().split('\n').slice(0, 3).join('; ') || err.message;
  if (/permission denied|you must be root|Operation not permitted/i.test(detail)) {
    const uid = process.getuid?.();
    return `${command}: ${detail}. Docker egress rules need root (CAP_NET_ADMIN) on the engine's host; this process runs as uid ${uid} (docs/sandbox-backends.md, "Reach")`;
  }
  return `${command}: ${detail}`;
}
