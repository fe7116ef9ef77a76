import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';

/**
 * A host of "the internet" for egress tests: a network namespace behind a veth pair, holding a
 * public-looking address (198.18.0.0/15, the benchmarking range, which no egress list counts as
 * private) routed from this machine, and a Node script run inside it. The address is on none of
 * this machine's interfaces, so an egress proxy treats it as any outside server. Needs root and
 * `ip` (iproute2).
 */
export interface OutsideHost {
  /** The public-looking address the script's servers listen on. */
  address: string;
  stop(): void;
}

export function canMakeOutsideHost(): boolean {
  return process.getuid?.() === 0 && spawnSync('ip', ['netns', 'list'], { stdio: 'ignore' }).status === 0;
}

/**
 * Starts `script` (Node, CommonJS) inside the namespace; it must print a line once it listens.
 * `ADDRESS` in the script stands for the public-looking address.
 */
export async function startOutsideHost(script: string): Promise<OutsideHost> {
  const tag = randomBytes(3).toString('hex');
  const octet = 16 + (Number.parseInt(tag.slice(0, 2), 16) % 200);
  const netns = `soh-${tag}`;
  const veth = `sohv-${tag}`;
  const inner = `10.214.${octet}.2`;
  const address = `198.19.${octet}.2`;
  const sh = (args: string[]) => execFileSync('ip', args, { stdio: 'ignore' });
  const cleanup = () => {
    spawnSync('ip', ['route', 'del', `${address}/32`], { stdio: 'ignore' });
    spawnSync('ip', ['link', 'del', veth], { stdio: 'ignore' });
    spawnSync('ip', ['netns', 'del', netns], { stdio: 'ignore' });
  };
  try {
    sh(['netns', 'add', netns]);
    sh(['link', 'add', veth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', netns]);
    sh(['addr', 'add', `10.214.${octet}.1/24`, 'dev', veth]);
    sh(['link', 'set', veth, 'up']);
    sh(['-n', netns, 'addr', 'add', `${inner}/24`, 'dev', 'eth0']);
    sh(['-n', netns, 'addr', 'add', `${address}/32`, 'dev', 'eth0']);
    sh(['-n', netns, 'link', 'set', 'eth0', 'up']);
    sh(['-n', netns, 'link', 'set', 'lo', 'up']);
    sh(['-n', netns, 'route', 'add', 'default', 'via', `10.214.${octet}.1`]);
    sh(['route', 'add', `${address}/32`, 'via', inner]);
  } catch (err) {
    cleanup();
    throw err;
  }
  const child = spawn(
    'ip',
    ['netns', 'exec', netns, process.execPath, '-e', script.replaceAll('ADDRESS', address)],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const ready = await new Promise<boolean>((resolve) => {
    child.stdout?.once('data', () => resolve(true));
    child.once('exit', () => resolve(false));
  });
  const stop = () => {
    child.kill();
    cleanup();
  };
  if (!ready) {
    stop();
    throw new Error('the outside host script exited before it printed that it listens');
  }
  return { address, stop };
}
