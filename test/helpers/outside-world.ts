import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';

const sh = (cmd: string, args: string[]) => execFileSync(cmd, args, { encoding: 'utf8' });

/**
 * "The internet" for egress tests: a network namespace behind a veth pair, with a private
 * address (10.213.x.2) and a public-looking one (198.18.x.2) routed from the host, and an HTTP
 * server on 8080 and 9090 at both (`/big`: 100 MB). Needs root. Sandboxes reach it through the
 * host's forwarding, as they would a server elsewhere.
 */
export class OutsideWorld {
  readonly netns: string;
  readonly privateAddr: string;
  readonly publicAddr: string;
  private readonly veth: string;
  private server: ChildProcess | undefined;

  private constructor(readonly tag: string) {
    this.netns = `sse-${tag}`;
    this.veth = `ssv-${tag}`;
    ({ privateAddr: this.privateAddr, publicAddr: this.publicAddr } = OutsideWorld.addresses(tag));
  }

  /** The two addresses a world started with `tag` has, known before it starts. */
  static addresses(tag: string): { privateAddr: string; publicAddr: string } {
    const octet = 16 + (Number.parseInt(tag.slice(0, 2), 16) % 200);
    return { privateAddr: `10.213.${octet}.2`, publicAddr: `198.18.${octet}.2` };
  }

  /** `tag`: 6 hex characters, unique among the tests running at once (names are ≤ 15 characters). */
  static async start(tag = randomBytes(3).toString('hex')): Promise<OutsideWorld> {
    const world = new OutsideWorld(tag);
    try {
      await world.setUp();
    } catch (err) {
      world.close();
      throw err;
    }
    return world;
  }

  private async setUp(): Promise<void> {
    const { netns, veth } = this;
    const gateway = this.privateAddr.replace(/\.2$/, '.1');
    sh('ip', ['netns', 'add', netns]);
    sh('ip', ['link', 'add', veth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', netns]);
    sh('ip', ['addr', 'add', `${gateway}/24`, 'dev', veth]);
    sh('ip', ['link', 'set', veth, 'up']);
    sh('ip', ['-n', netns, 'addr', 'add', `${this.privateAddr}/24`, 'dev', 'eth0']);
    sh('ip', ['-n', netns, 'addr', 'add', `${this.publicAddr}/32`, 'dev', 'eth0']);
    sh('ip', ['-n', netns, 'link', 'set', 'eth0', 'up']);
    sh('ip', ['-n', netns, 'link', 'set', 'lo', 'up']);
    sh('ip', ['route', 'add', `${this.publicAddr}/32`, 'via', this.privateAddr]);
    const script = `
      const http = require('node:http');
      const chunk = Buffer.alloc(1 << 20, 120);
      const handler = (req, res) => {
        if (req.url === '/big') {
          res.writeHead(200, { 'content-length': 100 * chunk.length });
          let sent = 0;
          const more = () => { while (sent < 100) { sent++; if (!res.write(chunk)) return res.once('drain', more); } res.end(); };
          return more();
        }
        res.end('hello from ' + req.socket.localPort + '\\n');
      };
      http.createServer(handler).listen(8080);
      http.createServer(handler).listen(9090, () => console.log('ready'));`;
    this.server = this.inNamespace(script);
    await new Promise<void>((resolve, reject) => {
      this.server?.stdout?.once('data', () => resolve());
      this.server?.once('exit', (code) => reject(new Error(`outside server exited (${code})`)));
    });
  }

  /** Runs a Node script in the namespace; it signals readiness by printing a line. */
  inNamespace(script: string): ChildProcess {
    return spawn('ip', ['netns', 'exec', this.netns, process.execPath, '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
  }

  close(): void {
    this.server?.kill();
    spawnSync('ip', ['route', 'del', `${this.publicAddr}/32`]);
    spawnSync('ip', ['link', 'del', this.veth]);
    spawnSync('ip', ['netns', 'del', this.netns]);
  }
}
