/**
 * A client in a process of its own, for tests that kill it: connects to the live sandbox
 * `argv[2]`, starts `argv[3]` there as a background process, prints `id <processId>`, then
 * follows it, printing `stdout <line>` for each line of its output as it comes.
 *
 *   REDIS_URL=… SANDSTREAM_NAMESPACE=… vite-node test/helpers/process-follower.ts <sandbox> <command>
 *   SANDSTREAM_URL=http://… vite-node test/helpers/process-follower.ts <sandbox> <command>   (over the API)
 */
import { SandstreamClient } from '@sandstream/client';
import { testRedisUrl } from '@sandstream/test-support';

const [sandboxId, command] = process.argv.slice(2);
if (!sandboxId || !command) throw new Error('usage: process-follower.ts <sandbox id> <command>');

const client = process.env.SANDSTREAM_URL
  ? new SandstreamClient({ url: process.env.SANDSTREAM_URL })
  : new SandstreamClient({
      redisUrl: testRedisUrl(),
      namespace: process.env.SANDSTREAM_NAMESPACE ?? 'sandstream',
    });
const sandbox = await client.sandboxes.connect(sandboxId);
const started = await sandbox.processes.start(command);
console.log(`id ${started.id}`);
const result = await started.follow({ onStdout: (line) => console.log(`stdout ${line}`) });
console.log(`end ${result.exitCode}`);
await client.close();
