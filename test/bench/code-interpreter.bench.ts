/**
 * The code interpreter's cost (issue 36): `runCode('1+1')` p50 through the SDK (Redis, and HTTP)
 * against the kernel's own round trip driven directly inside the same sandbox (a Python driver
 * that starts the same runner on pipes and sends it the same cell), and `exec(['true'])` (the
 * floor of any command); and, where the sandbox's python3 has jupyter_client (the python template's
 * Debian python3-ipykernel), against ipykernel driven directly over the Jupyter messaging protocol
 * (the kernel the issue named); and runCode with an onResult (the main result read from its live
 * `result` event) against without. Kernel start: the first runCode of a fresh context (a fresh sandbox's
 * first, and createCodeContext) against `python3 -c 1` timed in the sandbox and through exec.
 * On the in-process backend (host Debian python3), and on Docker with the python template
 * when the image and the carrier are there.
 *
 *   npm run build && npx vite-node test/bench/code-interpreter.bench.ts [rounds]
 */
import { execFileSync } from 'node:child_process';
import type { Sandbox, SandstreamClient } from '@sandstream/client';
import { findCarrierImage, summarize, testRedisUrl } from '@sandstream/test-support';
import { PYTHON_RUNNER } from '../../agent/src/code/python-runner.js';
import { viewThrough } from '../helpers/sdk-transports.js';
import { startStack } from '../helpers/services-stack.js';

const ROUNDS = Number(process.argv[2] ?? 200);
const ms = (n: number) => `${n.toFixed(2)} ms`;

/** Starts the runner as the agent does (fds 3 and 4), times its start and `1+1` round trips. */
const DRIVER = String.raw`
import json, os, subprocess, sys, time
runner, rounds = open(sys.argv[1]).read(), int(sys.argv[2])
python = sys.executable
def pct(xs, p):
    xs = sorted(xs); return xs[min(len(xs) - 1, int(len(xs) * p / 100))]
starts = []
for _ in range(5):
    t = time.perf_counter(); subprocess.run([python, '-c', '1']); starts.append((time.perf_counter() - t) * 1000)
cells_r, cells_w = os.pipe(); replies_r, replies_w = os.pipe()
high = [os.dup2(fd, 100 + i) for i, fd in enumerate((cells_r, replies_w))]
def child():
    os.dup2(100, 3); os.dup2(101, 4)
t = time.perf_counter()
proc = subprocess.Popen([python, '-u', '-c', runner], preexec_fn=child, pass_fds=(3, 4, 100, 101), stdin=subprocess.DEVNULL)
for fd in (cells_r, replies_w, 100, 101): os.close(fd)
replies = os.fdopen(replies_r, 'rb'); cells = os.fdopen(cells_w, 'wb', buffering=0)
json.loads(replies.readline()); ready = (time.perf_counter() - t) * 1000
trips = []
for i in range(rounds + 30):
    t = time.perf_counter()
    cells.write((json.dumps({'id': i, 'code': '1+1'}) + '\n').encode())
    while json.loads(replies.readline())['type'] != 'done': pass
    if i >= 30: trips.append((time.perf_counter() - t) * 1000)
proc.kill()
print(json.dumps({'ready': ready, 'pythonC': pct(starts, 50), 'tripP50': pct(trips, 50), 'tripP99': pct(trips, 99)}))
`;

/**
 * Starts ipykernel with jupyter_client's KernelManager and times `1+1` until both its
 * execute_reply (shell) and its execute_result (iopub) are in: the whole cell as a Jupyter client sees it.
 */
const IPYKERNEL_DRIVER = `
import json, os, sys, time
# The sandbox's HOME may not be writable; the connection file goes next to the script.
os.environ['JUPYTER_RUNTIME_DIR'] = os.path.abspath('bench-jupyter-runtime')
os.environ['PYDEVD_DISABLE_FILE_VALIDATION'] = '1'
from jupyter_client import KernelManager
rounds = int(sys.argv[1])
def pct(xs, p):
    xs = sorted(xs); return xs[min(len(xs) - 1, int(len(xs) * p / 100))]
t = time.perf_counter()
km = KernelManager(kernel_name='python3'); km.start_kernel()
kc = km.client(); kc.start_channels(); kc.wait_for_ready(timeout=60)
ready = (time.perf_counter() - t) * 1000
def cell():
    msg_id = kc.execute('1+1')
    replied = result = False
    while not (replied and result):
        if not replied:
            replied = kc.get_shell_msg(timeout=10)['parent_header'].get('msg_id') == msg_id
        if not result:
            m = kc.get_iopub_msg(timeout=10)
            result = m['parent_header'].get('msg_id') == msg_id and m['msg_type'] == 'execute_result'
trips = []
for i in range(rounds + 30):
    t = time.perf_counter(); cell()
    if i >= 30: trips.append((time.perf_counter() - t) * 1000)
kc.stop_channels(); km.shutdown_kernel(now=True)
print(json.dumps({'ready': ready, 'tripP50': pct(trips, 50), 'tripP99': pct(trips, 99)}))
`;

interface Backend {
  name: string;
  image: string;
  env: Record<string, string>;
  sandboxEnv: Record<string, string>;
  python: string;
}
const backends: Backend[] = [
  {
    name: 'in-process',
    image: 'debian:bookworm-slim',
    env: {},
    sandboxEnv: { SANDSTREAM_PYTHON: '/usr/bin/python3' },
    python: '/usr/bin/python3',
  },
];
const carrier = findCarrierImage();
const hasPythonImage = (() => {
  try {
    execFileSync('docker', ['image', 'inspect', 'sandstream/python:bookworm'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();
if (carrier && hasPythonImage) {
  backends.push({
    name: 'docker (python template)',
    image: 'sandstream/python:bookworm',
    env: {
      SANDBOX_TYPE: 'docker',
      SANDSTREAM_DOCKER_NETWORK: 'host',
      SANDSTREAM_ALLOW_OPEN_REDIS: '1',
      SANDSTREAM_AGENT_CARRIER_IMAGE: carrier,
    },
    sandboxEnv: {},
    python: 'python3',
  });
}

async function timed(run: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await run();
  return performance.now() - t;
}

for (const backend of backends) {
  const stack = await startStack({ label: 'codebench', env: backend.env });
  const http = await viewThrough(stack, 'http', testRedisUrl());
  try {
    console.log(`\n== ${backend.name} ==`);
    // Kernel start: a fresh sandbox's first runCode, a few times.
    const firsts: number[] = [];
    const sandboxes: Sandbox[] = [];
    for (let i = 0; i < 3; i++) {
      const sandbox = await stack.client.sandboxes.create({ image: backend.image, env: backend.sandboxEnv });
      sandboxes.push(sandbox);
      firsts.push(await timed(() => sandbox.runCode('1+1')));
    }
    const sandbox = sandboxes[0] as Sandbox;
    const overHttp = (http.client as SandstreamClient).sandboxes.handle(sandbox.id);
    const contexts: number[] = [];
    for (let i = 0; i < 5; i++) contexts.push(await timed(() => sandbox.createCodeContext()));
    const execPythonC: number[] = [];
    for (let i = 0; i < 5; i++)
      execPythonC.push(await timed(() => sandbox.exec([backend.python, '-c', '1'])));

    await sandbox.files.write('bench-runner.py', PYTHON_RUNNER);
    await sandbox.files.write('bench-driver.py', DRIVER);
    const driven = await sandbox.exec([backend.python, 'bench-driver.py', 'bench-runner.py', String(ROUNDS)]);
    if (driven.exitCode !== 0) throw new Error(`driver failed: ${driven.stderr}`);
    const direct = JSON.parse(driven.stdout) as {
      ready: number;
      pythonC: number;
      tripP50: number;
      tripP99: number;
    };

    // ipykernel driven directly, if this sandbox's python3 has jupyter_client (host Debian may not).
    const hasJupyter =
      (await sandbox.exec([backend.python, '-c', 'import jupyter_client, ipykernel'])).exitCode === 0;
    let ipykernel: { ready: number; tripP50: number; tripP99: number } | undefined;
    if (hasJupyter) {
      await sandbox.files.write('bench-ipykernel.py', IPYKERNEL_DRIVER);
      const run = await sandbox.exec([backend.python, 'bench-ipykernel.py', String(ROUNDS)]);
      if (run.exitCode !== 0) throw new Error(`ipykernel driver failed: ${run.stderr}`);
      ipykernel = JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '');
    }

    const ways: [string, () => Promise<unknown>][] = [
      ['SDK over Redis: exec([true])', () => sandbox.exec(['true'])],
      ["SDK over Redis: runCode('1+1')", () => sandbox.runCode('1+1')],
      ["SDK over HTTP: runCode('1+1')", () => overHttp.runCode('1+1')],
      // The main result also travels as a live `result` event; onResult reads it from there.
      ["SDK over Redis: runCode('1+1', { onResult })", () => sandbox.runCode('1+1', { onResult: () => {} })],
    ];
    const samples = new Map(ways.map(([name]) => [name, [] as number[]]));
    for (let i = 0; i < 30; i++) for (const [, run] of ways) await run();
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? [0, 1, 2, 3] : [3, 2, 1, 0];
      for (const k of order) {
        const [name, run] = ways[k] as (typeof ways)[number];
        samples.get(name)?.push(await timed(run));
      }
    }
    const p50 = new Map<string, number>();
    console.log(
      `kernel round trip driven directly in the sandbox ('1+1', pipes): p50 ${ms(direct.tripP50)} p99 ${ms(direct.tripP99)}`,
    );
    for (const [name, xs] of samples) {
      const x = summarize(xs);
      p50.set(name, x.p50);
      console.log(`${name} ×${x.n}: p50 ${ms(x.p50)} p99 ${ms(x.p99)}`);
    }
    const redis = p50.get(ways[1]?.[0] ?? '') ?? Number.NaN;
    const exec = p50.get(ways[0]?.[0] ?? '') ?? Number.NaN;
    const live = p50.get(ways[3]?.[0] ?? '') ?? Number.NaN;
    console.log(
      `runCode over Redis / kernel's own round trip at p50: ${(redis / direct.tripP50).toFixed(1)}× (goal ≤ 1.5×: ${redis <= 1.5 * direct.tripP50 ? 'met' : 'NOT met'}); runCode − exec(true): ${ms(redis - exec)}; with onResult / without: ${(live / redis).toFixed(2)}×`,
    );
    if (ipykernel) {
      console.log(
        `ipykernel driven directly in the sandbox (jupyter_client, '1+1' to execute_reply and execute_result): p50 ${ms(ipykernel.tripP50)} p99 ${ms(ipykernel.tripP99)}, kernel ready after ${ms(ipykernel.ready)}`,
      );
      console.log(
        `runCode over Redis / ipykernel's round trip at p50: ${(redis / ipykernel.tripP50).toFixed(2)}× (goal ≤ 1.5×: ${redis <= 1.5 * ipykernel.tripP50 ? 'met' : 'NOT met'}); over HTTP: ${((p50.get(ways[2]?.[0] ?? '') ?? Number.NaN) / ipykernel.tripP50).toFixed(2)}×`,
      );
    } else {
      console.log(`ipykernel baseline skipped: ${backend.python} in this sandbox has no jupyter_client`);
    }
    const first = summarize(firsts);
    console.log(
      `first runCode of a fresh sandbox (kernel start): p50 ${ms(first.p50)} of ${firsts.map((x) => x.toFixed(0)).join(', ')} ms; createCodeContext (a kernel start): p50 ${ms(summarize(contexts).p50)}`,
    );
    console.log(
      `python3 -c 1 in the sandbox: ${ms(direct.pythonC)} (driver), through exec ${ms(summarize(execPythonC).p50)}; the runner ready after ${ms(direct.ready)} in the driver; first runCode / exec(python3 -c 1): ${(first.p50 / summarize(execPythonC).p50).toFixed(2)}×`,
    );
    for (const s of sandboxes) await s.close();
  } finally {
    await http.stop();
    await stack.stop();
  }
}
