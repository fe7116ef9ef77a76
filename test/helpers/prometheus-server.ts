import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, pollUntil } from '@sandstream/test-support';
import { stringify } from 'yaml';
import { z } from 'zod';

/** One sample of an instant query: the series' labels and its value. */
const SampleSchema = z.object({
  metric: z.record(z.string(), z.string()),
  value: z.tuple([z.number(), z.string()]),
});
export type PrometheusSample = z.infer<typeof SampleSchema>;
const QueryResponseSchema = z.object({
  status: z.literal('success'),
  data: z.object({ resultType: z.literal('vector'), result: z.array(SampleSchema) }),
});
const TargetsResponseSchema = z.object({
  status: z.literal('success'),
  data: z.object({
    activeTargets: z.array(
      z.object({ labels: z.record(z.string(), z.string()), health: z.string(), lastError: z.string() }),
    ),
  }),
});
export type PrometheusTarget = z.infer<typeof TargetsResponseSchema>['data']['activeTargets'][number];

/**
 * A real Prometheus (Debian's `prometheus`) scraping the given targets every second, with its TSDB
 * in a scratch directory, listening on a free loopback port. stop() kills it and removes the data.
 */
export class PrometheusServer {
  private constructor(
    readonly url: string,
    private readonly child: ChildProcess,
    private readonly dir: string,
    readonly log: string[],
  ) {}

  /** `targets`: job name → host:port of its /metrics. */
  static async start(targets: Record<string, string>): Promise<PrometheusServer> {
    const dir = mkdtempSync(join(tmpdir(), 'sandstream-prometheus-'));
    const config = {
      global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' },
      scrape_configs: Object.entries(targets).map(([job, target]) => ({
        job_name: job,
        static_configs: [{ targets: [target] }],
      })),
    };
    writeFileSync(join(dir, 'prometheus.yml'), stringify(config));
    const port = await freePort();
    const child = spawn(
      'prometheus',
      [
        `--config.file=${join(dir, 'prometheus.yml')}`,
        `--storage.tsdb.path=${join(dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${port}`,
        '--log.level=warn',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const log: string[] = [];
    child.stdout?.on('data', (d: Buffer) => log.push(d.toString()));
    child.stderr?.on('data', (d: Buffer) => log.push(d.toString()));
    const server = new PrometheusServer(`http://127.0.0.1:${port}`, child, dir, log);
    try {
      await pollUntil(
        'Prometheus ready',
        async () => {
          if (child.exitCode !== null)
            throw new Error(`prometheus exited ${child.exitCode}: ${log.join('')}`);
          return fetch(`${server.url}/-/ready`).then(
            (r) => r.ok,
            () => false,
          );
        },
        { timeoutMs: 30_000, intervalMs: 200 },
      );
    } catch (err) {
      await server.stop();
      throw err;
    }
    return server;
  }

  /** An instant query through the HTTP API (/api/v1/query). */
  async query(promql: string): Promise<PrometheusSample[]> {
    const res = await fetch(`${this.url}/api/v1/query?query=${encodeURIComponent(promql)}`);
    return QueryResponseSchema.parse(await res.json()).data.result;
  }

  async targets(): Promise<PrometheusTarget[]> {
    const res = await fetch(`${this.url}/api/v1/targets?state=active`);
    return TargetsResponseSchema.parse(await res.json()).data.activeTargets;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      const exited = new Promise((resolve) => this.child.once('exit', resolve));
      this.child.kill('SIGTERM');
      await exited;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
