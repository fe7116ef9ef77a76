import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

/**
 * A service's built main.js run as a real child process, with its JSON log lines collected:
 * for tests that check start-up, readiness and SIGTERM behaviour end to end.
 */
export class ServiceProcess {
  readonly lines: Record<string, unknown>[] = [];
  readonly stderr: string[] = [];
  private readonly exited: Promise<number | null>;
  private readonly child: ChildProcess;

  constructor(entry: string, env: Record<string, string>) {
    this.child = spawn(process.execPath, [entry], {
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    createInterface({ input: this.child.stdout! }).on('line', (line) => {
      try {
        this.lines.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        this.stderr.push(line);
      }
    });
    createInterface({ input: this.child.stderr! }).on('line', (line) => this.stderr.push(line));
    this.exited = new Promise((resolve) => this.child.once('exit', (code) => resolve(code)));
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** Resolves with the first log line for which `match` holds. */
  async waitForLog(
    match: (line: Record<string, unknown>) => boolean,
    timeoutMs = 20_000,
  ): Promise<Record<string, unknown>> {
    const until = Date.now() + timeoutMs;
    while (Date.now() < until) {
      const found = this.lines.find(match);
      if (found) return found;
      if (this.child.exitCode !== null) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error(
      `no matching log line; stdout: ${JSON.stringify(this.lines.slice(-5))} stderr: ${this.stderr.slice(-5).join('\n')}`,
    );
  }

  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  /** The exit code, or rejects after timeoutMs (and kills the process). */
  async exitCode(timeoutMs = 30_000): Promise<number | null> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        this.child.kill('SIGKILL');
        reject(new Error(`service did not exit within ${timeoutMs} ms`));
      }, timeoutMs);
    });
    try {
      return await Promise.race([this.exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null) {
      this.child.kill('SIGKILL');
      await this.exited;
    }
  }
}
